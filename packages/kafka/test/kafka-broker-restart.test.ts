// The broker restarted mid-run (services.sh restart kafka): the consumer recovers by itself, nothing is lost
// and nothing is applied twice. Holds the broker exclusively, so no other Kafka test file runs meanwhile.
import { idempotentConsumer } from '@inboxkit/core';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kafkaConsumer } from '../src/index.js';
import { FAST_GROUP, connectedProducer, createTopics, testKafka } from './kafka-harness.js';
import { holdBrokerExclusive } from './support/broker-lock.js';
import { restartKafka } from './support/kafka-services.js';
import { schemaName, testDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

let database: TestDatabase;

beforeAll(async () => {
  database = await testDatabase(schemaName(uniqueName('kafka_restart')));
});

afterAll(async () => {
  await database?.dispose();
});

describe('kafkaConsumer across a broker restart', () => {
  it(
    'recovers from a broker restart mid-run: nothing lost, nothing applied twice',
    { timeout: 300_000 },
    async () => {
      const release = await holdBrokerExclusive(180_000);
      const kafka = testKafka();
      const producer = await connectedProducer(kafka);
      const topic = uniqueName('restart');
      const cleanup = await createTopics(kafka, [
        { topic, partitions: 3 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      const groupId = uniqueName('group');
      const recorder = new OutcomeRecorder();
      const handler = idempotentConsumer<unknown, Transaction<unknown>>({
        name: uniqueName('restart'),
        store: database.store,
        handler: async (message, context) => database.applyEffect(context.tx, message.id),
        hooks: { onOutcome: recorder.hook },
      });
      const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
      const transport = kafkaConsumer({
        consumer,
        kafka,
        topics: [topic],
        handler,
        fromBeginning: true,
        partitionConcurrency: 3,
      });
      const ids = Array.from({ length: 600 }, (_, i) => uniqueName(`r${i}`));
      const produce = (slice: string[]) =>
        producer.send({
          topic,
          acks: -1,
          messages: slice.map((id, i) => ({ key: `k${i}`, value: '{}', headers: { 'message-id': id } })),
        });
      try {
        await transport.start();
        await produce(ids.slice(0, 300));
        await recorder.waitForCount(100, { status: ['processed', 'duplicate'], timeoutMs: 30_000 });
        await restartKafka();
        await produce(ids.slice(300));
        for (const id of ids) await recorder.waitFor(id, 'processed', { timeoutMs: 90_000 });
      } finally {
        await transport.stop();
        await consumer.disconnect();
        await producer.disconnect();
        await cleanup();
        release();
      }
      const counts = await database.effectCounts();
      expect(
        ids.filter((id) => counts.get(id) !== 1),
        'ids not applied exactly once',
      ).toEqual([]);
      expect(recorder.count('processed')).toBe(ids.length);
    },
  );
});
