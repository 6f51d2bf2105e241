// The outbox publisher and the dead-letter reader (CLI/console replay source) on the real Kafka through
// platformaticKafka(): what they produce and commit is read back with @platformatic/kafka itself; only topic
// creation and the group listing use kafkajs' admin.
import { HEADERS, MessageTooLargeError, PublishError, deadLetterHeaders } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import type { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import * as platformatic from '@platformatic/kafka';

import { kafkaDeadLetterQueue, kafkaPublisher, platformaticKafka } from '../src/index.js';
import type { KafkaClientLike, KafkaDeadLetterQueueReader } from '../src/index.js';
import { FAST_GROUP, createTopics, testKafka } from './kafka-harness.js';
import { readTopicLike, testPlatformaticKafka } from './platformatic-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let kafka: KafkaClientLike;
let kafkajs: Kafka;
let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testPlatformaticKafka();
  kafkajs = testKafka();
});

afterAll(() => releaseBroker?.());

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

describe('kafkaPublisher on @platformatic/kafka', () => {
  it('publishes with the message-id header, the key, headers, body and timestamp, to each topic; close() ends it', async () => {
    const a = uniqueName('plt-pub-a');
    const b = uniqueName('plt-pub-b');
    const cleanup = await createTopics(kafkajs, [
      { topic: a, partitions: 1 },
      { topic: b, partitions: 1 },
    ]);
    const publisher = kafkaPublisher({ kafka });
    await publisher.publish([
      { destination: a, id: 'pay-1', key: 'acct-7', body: '{"amount":5}', headers: { traceparent: '00-1' } },
      { destination: b, id: 'pay-2', body: new Uint8Array([1, 2, 3]) },
      {
        destination: a,
        id: 'pay-3',
        key: 'acct-7',
        body: '{"amount":6}',
        timestamp: new Date(1_700_000_000_000),
      },
    ]);
    await publisher.close();
    await expect(publisher.publish([{ destination: a, id: 'pay-4', body: 'x' }])).rejects.toThrow(
      PublishError,
    );
    const inA = await readTopicLike(kafka, a, 2, 20_000);
    expect(inA.map((e) => [e.id, (e as { key?: string }).key, e.headers['traceparent']])).toEqual([
      ['pay-1', 'acct-7', '00-1'],
      ['pay-3', 'acct-7', undefined],
    ]);
    expect(Buffer.from(inA[0]!.body as Uint8Array).toString()).toBe('{"amount":5}');
    const inB = await readTopicLike(kafka, b, 1, 20_000);
    expect([...(inB[0]!.body as Uint8Array)]).toEqual([1, 2, 3]);
    await cleanup();
  });

  it('names a record over max.message.bytes in a non-retriable MessageTooLargeError, after confirming the ones before it', async () => {
    const topic = uniqueName('plt-pub-small');
    const admin = kafkajs.admin();
    await admin.connect();
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: 1,
          replicationFactor: 1,
          configEntries: [{ name: 'max.message.bytes', value: '4096' }],
        },
      ],
    });
    const publisher = kafkaPublisher({ kafka, timeoutMs: 10_000 });
    const error = await publisher
      .publish([
        { destination: topic, id: 'fits-1', body: 'a' },
        { destination: topic, id: 'too-big', body: 'b'.repeat(10_000) },
        { destination: topic, id: 'fits-2', body: 'c' },
      ])
      .catch((e: unknown) => e);
    await publisher.close();
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect(error).toMatchObject({ messageId: 'too-big', retriable: false, code: 'MESSAGE_TOO_LARGE' });
    expect((await readTopicLike(kafka, topic, 1, 20_000)).map((e) => e.id)).toEqual(['fits-1']);
    await admin.deleteTopics({ topics: [topic] }).finally(() => admin.disconnect());
  });
});

describe('kafkaDeadLetterQueue on @platformatic/kafka', () => {
  async function dlqWith(
    count: number,
  ): Promise<{ topic: string; ids: string[]; cleanup: () => Promise<void> }> {
    const topic = uniqueName('plt-orders.dlq');
    const cleanup = await createTopics(kafkajs, [{ topic, partitions: 1 }]);
    const ids = Array.from({ length: count }, (_, i) => uniqueName(`dead${i}`));
    const producer = kafka.producer({ idempotent: true });
    await producer.connect();
    await producer.sendBatch({
      acks: -1,
      topicMessages: [
        {
          topic,
          messages: ids.map((id, i) => ({
            key: `acct-${i}`,
            value: JSON.stringify({ n: i }),
            headers: deadLetterHeaders({
              originalId: id,
              consumer: 'payments',
              reason: 'max-attempts',
              attempts: 5,
              error: { name: 'Error', message: 'boom' },
              firstFailureAt: new Date(0),
              lastFailureAt: new Date(1),
              deadLetteredAt: new Date(2),
              source: { transport: 'kafka', destination: 'orders', partition: 0, offset: String(i) },
            }),
          })),
        },
      ],
    });
    await producer.disconnect();
    return { topic, ids, cleanup };
  }

  function reader(topic: string): KafkaDeadLetterQueueReader {
    return kafkaDeadLetterQueue({
      kafka,
      topic,
      groupId: uniqueName('plt-replay'),
      idleTimeoutMs: 3_000,
      consumerConfig: FAST_GROUP,
    });
  }

  it('browses without consuming and deletes its browse groups', async () => {
    const { topic, ids, cleanup } = await dlqWith(4);
    const dlq = reader(topic);
    const first = await collect(dlq.browse({ limit: 10 }));
    expect(first.map((e) => e.id)).toEqual(ids);
    expect(first.map((e) => e.key)).toEqual(['acct-0', 'acct-1', 'acct-2', 'acct-3']);
    expect(first.map((e) => e.position)).toEqual([0, 1, 2, 3].map((o) => `${topic}:0:${o}`));
    expect(first[0]!.headers[HEADERS.reason]).toBe('max-attempts');
    expect((await collect(dlq.browse({ limit: 2 }))).map((e) => e.id)).toEqual(ids.slice(0, 2));
    const admin = kafkajs.admin();
    await admin.connect();
    const groups = (await admin.listGroups().finally(() => admin.disconnect())).groups.map((g) => g.groupId);
    expect(groups.filter((g) => g.includes(topic) && g.includes('.browse.'))).toEqual([]);
    await dlq.close();
    await cleanup();
  });

  it('take commits only past removed entries: a released entry, and what follows it, is taken again', async () => {
    const { topic, ids, cleanup } = await dlqWith(5);
    const dlq = reader(topic);
    const taken: string[] = [];
    for await (const entry of dlq.take({ limit: 3 })) {
      taken.push(entry.id!);
      if (entry.id === ids[1]) await entry.release();
      else await entry.remove();
    }
    expect(taken).toEqual(ids.slice(0, 3));
    const again: string[] = [];
    for await (const entry of dlq.take({ limit: 10 })) {
      again.push(entry.id!);
      await entry.remove();
    }
    expect(again).toEqual(ids.slice(1));
    expect(await collect(dlq.take({ limit: 10 }))).toEqual([]);
    await dlq.close();
    await cleanup();
  });
});

describe('platformaticKafka', () => {
  it('refuses a missing module, client id or broker list, and a run() with autoCommit, with a TypeError saying what to pass', async () => {
    expect(() => platformaticKafka({} as never, { clientId: 'x', bootstrapBrokers: ['b:9092'] })).toThrow(
      /pass the @platformatic\/kafka module/,
    );
    expect(() => platformaticKafka(platformatic, { clientId: '', bootstrapBrokers: ['b:9092'] })).toThrow(
      TypeError,
    );
    expect(() => platformaticKafka(platformatic, { clientId: 'x', bootstrapBrokers: [] })).toThrow(
      /bootstrapBrokers/,
    );
    const consumer = kafka.consumer({ groupId: uniqueName('plt-refuse') });
    await expect(consumer.run({ autoCommit: true, eachBatch: async () => undefined })).rejects.toThrow(
      TypeError,
    );
    await consumer.disconnect();
  });
});
