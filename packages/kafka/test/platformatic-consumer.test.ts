// kafkaConsumer on @platformatic/kafka (platformaticKafka()) against the real broker and Postgres: duplicates,
// a record that keeps failing holds the commit back, and two consumers rebalancing during a run. The records
// are produced and the committed offsets read with kafkajs, as an observer independent of the adapter.
import { RetryableError, idempotentConsumer } from '@inboxkit/core';
import type { IdempotentConsumer, OutcomeStatus } from '@inboxkit/core';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import type { Kafka, Producer } from 'kafkajs';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kafkaConsumer } from '../src/index.js';
import type { KafkaClientLike, KafkaConsumerOptions, KafkaTransportConsumer } from '../src/index.js';
import { FAST_GROUP, connectedProducer, createTopics, testKafka } from './kafka-harness.js';
import { testPlatformaticKafka } from './platformatic-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { schemaName, testDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

let kafkajs: Kafka;
let kafka: KafkaClientLike;
let producer: Producer;
let database: TestDatabase;
let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafkajs = testKafka();
  kafka = testPlatformaticKafka();
  producer = await connectedProducer(kafkajs);
  database = await testDatabase(schemaName(uniqueName('plt_consumer')));
});

afterAll(async () => {
  await producer?.disconnect();
  await database?.dispose();
  releaseBroker?.();
});

const SETTLED: OutcomeStatus[] = ['processed', 'duplicate'];

async function produce(topic: string, records: readonly { id: string; key?: string }[]): Promise<void> {
  await producer.send({
    topic,
    acks: -1,
    messages: records.map((r) => ({
      key: r.key ?? null,
      value: JSON.stringify({ id: r.id }),
      headers: { 'message-id': r.id },
    })),
  });
}

type Handler = (id: string, attempt: number) => Promise<void>;

function consumerOf(name: string, options: { maxAttempts?: number; handler?: Handler } = {}) {
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
    name,
    store: database.store,
    maxAttempts: options.maxAttempts ?? 5,
    backoff: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 400, jitter: 'none' },
    decode: (body) => (body === null ? null : JSON.parse(Buffer.from(body as Uint8Array).toString('utf8'))),
    handler: async (message, context) => {
      if (options.handler) await options.handler(message.id, context.attempt);
      await database.applyEffect(context.tx, message.id);
    },
    hooks: { onOutcome: recorder.hook },
  });
  return { consumer, recorder };
}

async function start(
  topic: string,
  groupId: string,
  handler: IdempotentConsumer<unknown, Transaction<unknown>>,
  options: Partial<KafkaConsumerOptions> = {},
): Promise<{ transport: KafkaTransportConsumer; stop(): Promise<void> }> {
  const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
  const transport = kafkaConsumer({
    consumer,
    kafka,
    topics: [topic],
    handler,
    fromBeginning: true,
    pauseOnFailureMs: 200,
    heartbeatIntervalMs: FAST_GROUP.heartbeatInterval,
    ...options,
  } as KafkaConsumerOptions<unknown, Transaction<unknown>>);
  await transport.start();
  return {
    transport,
    async stop() {
      await transport.stop();
      await consumer.disconnect();
    },
  };
}

async function committed(topic: string, groupId: string): Promise<{ committed: number[]; end: number[] }> {
  const admin = kafkajs.admin();
  await admin.connect();
  try {
    const sorted = <T extends { partition: number }>(list: T[]) =>
      [...list].sort((a, b) => a.partition - b.partition);
    const c = sorted((await admin.fetchOffsets({ groupId, topics: [topic] }))[0]!.partitions).map((p) =>
      Number(p.offset),
    );
    const e = sorted(await admin.fetchTopicOffsets(topic)).map((p) => Number(p.high));
    return { committed: c, end: e };
  } finally {
    await admin.disconnect();
  }
}

async function expectAppliedOnce(ids: readonly string[]): Promise<void> {
  const counts = await database.effectCounts();
  const wrong = ids.filter((id) => counts.get(id) !== 1).map((id) => `${id}: ${counts.get(id) ?? 0}`);
  expect(wrong, 'ids not applied exactly once').toEqual([]);
}

describe('kafkaConsumer on @platformatic/kafka', () => {
  it.each([
    { mode: 'message', keyConcurrency: 8 },
    { mode: 'batch', keyConcurrency: 1 },
  ] as const)(
    'applies each id once in $mode mode with 30 percent duplicates, and commits to the end',
    async ({ mode, keyConcurrency }) => {
      const topic = uniqueName('plt-orders');
      const cleanup = await createTopics(kafkajs, [
        { topic, partitions: 3 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      const groupId = uniqueName('plt-group');
      const { consumer, recorder } = consumerOf(uniqueName(`plt-dups-${mode}`));
      const ids = Array.from({ length: 300 }, (_, i) => uniqueName(`m${i}`));
      const records = ids.map((id, i) => ({ id, key: `k${i % 7}` }));
      for (const [i, id] of ids.entries()) if (i % 10 < 3) records.push({ id, key: `k${i % 7}` });
      const running = await start(topic, groupId, consumer, {
        mode,
        keyConcurrency,
        partitionConcurrency: 3,
      });
      try {
        for (let i = 0; i < records.length; i += 50) await produce(topic, records.slice(i, i + 50));
        await recorder.waitForCount(records.length, { status: SETTLED, timeoutMs: 60_000 });
        expect(recorder.count('processed')).toBe(ids.length);
        expect(recorder.count('duplicate')).toBe(records.length - ids.length);
      } finally {
        await running.stop();
      }
      await expectAppliedOnce(ids);
      const { committed: c, end } = await committed(topic, groupId);
      expect(c).toEqual(end);
      await cleanup();
    },
  );

  it('never commits past a record that keeps failing: the records before it are committed, it and those after are not', async () => {
    const topic = uniqueName('plt-stuck');
    const cleanup = await createTopics(kafkajs, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    const groupId = uniqueName('plt-group');
    const ids = Array.from({ length: 10 }, (_, i) => uniqueName(`s${i}`));
    const stuck = ids[5]!;
    const { consumer, recorder } = consumerOf(uniqueName('plt-stuck'), {
      maxAttempts: 1_000,
      handler: async (id) => {
        if (id === stuck) throw new RetryableError('not yet');
      },
    });
    await produce(
      topic,
      ids.map((id) => ({ id })),
    );
    const running = await start(topic, groupId, consumer);
    try {
      for (const id of ids.slice(0, 5)) await recorder.waitFor(id, 'processed', { timeoutMs: 30_000 });
      // Several rounds of retry (pause, seek back, replay) later, the commit still stops at the stuck record.
      await recorder.waitFor(stuck, (o) => o.status === 'retry' && o.attempt >= 3, { timeoutMs: 30_000 });
      const deadline = Date.now() + 30_000;
      while ((await committed(topic, groupId)).committed[0] !== 5 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect((await committed(topic, groupId)).committed).toEqual([5]);
      expect(ids.slice(6).filter((id) => recorder.count('processed', id) > 0)).toEqual([]);
    } finally {
      await running.stop();
    }
    await cleanup();
  });

  it('applies every id exactly once with two consumers in one group and rebalances during the run', async () => {
    const topic = uniqueName('plt-rebalance');
    const cleanup = await createTopics(kafkajs, [
      { topic, partitions: 4 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    const groupId = uniqueName('plt-group');
    const ids = Array.from({ length: 1_200 }, (_, i) => uniqueName(`r${i}`));
    const slow: Handler = async () => new Promise((r) => setTimeout(r, 1));
    const a = consumerOf(uniqueName('plt-rebalance'), { handler: slow });
    const b = idempotentConsumer<unknown, Transaction<unknown>>({
      ...a.consumer.config,
      hooks: { onOutcome: a.recorder.hook },
    });
    const first = await start(topic, groupId, a.consumer, { partitionConcurrency: 2 });
    let second: Awaited<ReturnType<typeof start>> | undefined;
    try {
      await produce(
        topic,
        ids.slice(0, 400).map((id, i) => ({ id, key: `k${i}` })),
      );
      await a.recorder.waitForCount(100, { status: SETTLED, timeoutMs: 40_000 });
      second = await start(topic, groupId, b, { partitionConcurrency: 2 }); // rebalance: partitions split
      await produce(
        topic,
        ids.slice(400, 800).map((id, i) => ({ id, key: `k${i}` })),
      );
      await a.recorder.waitForCount(600, { status: SETTLED, timeoutMs: 40_000 });
      await first.stop(); // rebalance: the second takes everything
      await produce(
        topic,
        ids.slice(800).map((id, i) => ({ id, key: `k${i}` })),
      );
      for (const id of ids) await a.recorder.waitFor(id, 'processed', { timeoutMs: 40_000 });
    } finally {
      await first.stop();
      await second?.stop();
    }
    await expectAppliedOnce(ids);
    const { committed: c, end } = await committed(topic, groupId);
    expect(c).toEqual(end);
    await cleanup();
  }, 150_000);
});
