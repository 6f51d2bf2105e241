// Smoke: a real Kafka broker: produce, consume through a consumer group, commit the offset, read it back.
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { requireService, uniqueTestName } from '../support/services.js';

describe('kafka smoke', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('produces and consumes through a consumer group with a committed offset', async () => {
    const { brokers } = requireService('kafka');
    const kafka = new Kafka({ clientId: 'inboxkit-smoke', brokers, logLevel: logLevel.NOTHING });
    const topic = uniqueTestName('smoke-topic');
    const groupId = uniqueTestName('smoke-group');

    const admin = kafka.admin();
    await admin.connect();
    cleanups.push(() => admin.disconnect());
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    cleanups.push(async () => {
      await admin.deleteTopics({ topics: [topic] });
    });

    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true });
    await producer.connect();
    cleanups.push(() => producer.disconnect());
    await producer.send({
      topic,
      acks: -1,
      messages: [
        { key: 'k1', value: 'first', headers: { 'message-id': 'm-1' } },
        { key: 'k2', value: 'second', headers: { 'message-id': 'm-2' } },
      ],
    });

    const consumer = kafka.consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 1_000 });
    await consumer.connect();
    cleanups.push(() => consumer.disconnect());
    await consumer.subscribe({ topic, fromBeginning: true });

    const received: { value: string; id: string; offset: string }[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no messages within 30 s')), 30_000);
      consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ topic: t, partition, message }) => {
            received.push({
              value: message.value?.toString() ?? '',
              id: message.headers?.['message-id']?.toString() ?? '',
              offset: message.offset,
            });
            // Commit the next offset to read, only after the message is handled.
            await consumer.commitOffsets([
              { topic: t, partition, offset: (BigInt(message.offset) + 1n).toString() },
            ]);
            if (received.length === 2) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });

    expect(received.map((m) => [m.value, m.id])).toEqual([
      ['first', 'm-1'],
      ['second', 'm-2'],
    ]);
    await consumer.disconnect();

    const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
    expect(offsets[0]?.partitions).toEqual([{ partition: 0, offset: '2', metadata: null }]);
  });
});
