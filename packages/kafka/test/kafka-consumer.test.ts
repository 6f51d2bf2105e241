// kafkaConsumer against the real broker and real Postgres: duplicates, dead letters with every header, id
// resolution, tombstones, batch mode, a record that keeps failing, a failed dead-letter produce and rebalances.
// Every test checks the invariant: each id's effect applied once, offsets committed to the end only when
// settled. Every test runs on each Kafka client (kafkajs, and @platformatic/kafka through platformaticKafka());
// the records are produced, and offsets and dead letters read, with kafkajs as an observer independent of the
// client under test.
import { HEADERS, RetryableError, idempotentConsumer } from '@inboxkit/core';
import type { DeadLetterEntry, IdempotentConsumer, OutcomeStatus } from '@inboxkit/core';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import type { Kafka, Producer } from 'kafkajs';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kafkaConsumer } from '../src/index.js';
import type {
  KafkaClientLike,
  KafkaConsumerLike,
  KafkaConsumerOptions,
  KafkaTransportConsumer,
} from '../src/index.js';
import {
  FAST_GROUP,
  KAFKA_TEST_CLIENTS,
  connectedProducer,
  createTopics,
  readTopic,
  testClient,
  testKafka,
} from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { schemaName, testDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

let kafka: Kafka;
let producer: Producer;
let database: TestDatabase;

let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testKafka();
  producer = await connectedProducer(kafka);
  database = await testDatabase(schemaName(uniqueName('kafka_consumer')));
});

afterAll(async () => {
  await producer?.disconnect();
  await database?.dispose();
  releaseBroker?.();
});

/** A fresh source topic (and its DLQ) per test. */
async function topics(partitions = 3): Promise<{ topic: string; dlq: string; cleanup: () => Promise<void> }> {
  const topic = uniqueName('orders');
  const dlq = `${topic}.dlq`;
  const cleanup = await createTopics(kafka, [
    { topic, partitions },
    { topic: dlq, partitions: 1 },
  ]);
  return { topic, dlq, cleanup };
}

interface Record {
  readonly id?: string;
  readonly key?: string;
  readonly value?: string | null;
  readonly headers?: { [name: string]: string };
  readonly partition?: number;
}

async function produce(topic: string, records: readonly Record[]): Promise<void> {
  await producer.send({
    topic,
    acks: -1,
    messages: records.map((r) => ({
      key: r.key ?? null,
      value: r.value === undefined ? JSON.stringify({ id: r.id }) : r.value,
      headers: { ...r.headers, ...(r.id !== undefined ? { 'message-id': r.id } : {}) },
      ...(r.partition !== undefined ? { partition: r.partition } : {}),
    })),
  });
}

type Handler = (id: string, attempt: number, tx: Transaction<unknown>) => Promise<void>;

function consumerOf(name: string, options: { maxAttempts?: number; handler?: Handler } = {}) {
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
    name,
    store: database.store,
    maxAttempts: options.maxAttempts ?? 5,
    backoff: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 400, jitter: 'none' },
    decode: (body) => (body === null ? null : JSON.parse(Buffer.from(body as Uint8Array).toString('utf8'))),
    handler: async (message, context) => {
      if (options.handler) await options.handler(message.id, context.attempt, context.tx);
      await database.applyEffect(context.tx, message.id);
    },
    hooks: { onOutcome: recorder.hook },
  });
  return { consumer, recorder };
}

interface Running {
  readonly transport: KafkaTransportConsumer;
  readonly consumer: KafkaConsumerLike;
  stop(): Promise<void>;
}

/** Starts a kafkaConsumer whose consumer and dead-letter producer come from `client`. */
async function start(
  client: KafkaClientLike,
  topic: string,
  groupId: string,
  handler: IdempotentConsumer<unknown, Transaction<unknown>>,
  options: Partial<KafkaConsumerOptions> = {},
): Promise<Running> {
  const { consumer, transport } = unstarted(client, topic, groupId, handler, options);
  await transport.start();
  return {
    transport,
    consumer,
    async stop() {
      await transport.stop();
      await consumer.disconnect();
    },
  };
}

/** The kafkaConsumer `start` starts, not started yet. */
function unstarted(
  client: KafkaClientLike,
  topic: string,
  groupId: string,
  handler: IdempotentConsumer<unknown, Transaction<unknown>>,
  options: Partial<KafkaConsumerOptions> = {},
): { consumer: KafkaConsumerLike; transport: KafkaTransportConsumer } {
  const consumer = client.consumer({ groupId, ...FAST_GROUP });
  const transport = kafkaConsumer({
    consumer,
    kafka: client,
    topics: [topic],
    handler,
    fromBeginning: true,
    pauseOnFailureMs: 200,
    heartbeatIntervalMs: FAST_GROUP.heartbeatInterval,
    ...options,
  } as KafkaConsumerOptions<unknown, Transaction<unknown>>);
  return { consumer, transport };
}

/** Committed offset of the group per partition, against the topic's end. */
async function offsets(topic: string, groupId: string): Promise<{ committed: number[]; end: number[] }> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const committed = (await admin.fetchOffsets({ groupId, topics: [topic] }))[0]!.partitions;
    const ends = await admin.fetchTopicOffsets(topic);
    const byPartition = (
      list: { partition: number; offset?: string; high?: string }[],
      field: 'offset' | 'high',
    ) => [...list].sort((a, b) => a.partition - b.partition).map((p) => Number(p[field]));
    return { committed: byPartition(committed, 'offset'), end: byPartition(ends, 'high') };
  } finally {
    await admin.disconnect();
  }
}

async function expectFullyCommitted(topic: string, groupId: string): Promise<void> {
  const { committed, end } = await offsets(topic, groupId);
  expect(committed, 'the group committed up to the end of every partition').toEqual(end);
}

async function expectAppliedOnce(ids: readonly string[]): Promise<void> {
  const counts = await database.effectCounts();
  const wrong = ids.filter((id) => counts.get(id) !== 1).map((id) => `${id}: ${counts.get(id) ?? 0}`);
  expect(wrong, 'ids not applied exactly once').toEqual([]);
}

const SETTLED: OutcomeStatus[] = ['processed', 'duplicate'];

function header(entry: DeadLetterEntry, name: string): string | undefined {
  return entry.headers[name];
}

describe.each(KAFKA_TEST_CLIENTS)('kafkaConsumer on %s against Kafka and Postgres', (clientName) => {
  let client: KafkaClientLike;
  beforeAll(() => {
    client = testClient(clientName);
  });
  it.each([
    { mode: 'message', keyConcurrency: 1 },
    { mode: 'message', keyConcurrency: 8 },
    { mode: 'batch', keyConcurrency: 1 },
  ] as const)(
    'applies each id once in $mode mode ($keyConcurrency keys at once): the same id produced three times and 30 percent of ids duplicated',
    async ({ mode, keyConcurrency }) => {
      const { topic, cleanup } = await topics();
      const groupId = uniqueName('group');
      const { consumer, recorder } = consumerOf(uniqueName(`dups-${mode}`));
      const ids = Array.from({ length: 300 }, (_, i) => uniqueName(`m${i}`));
      const records: Record[] = ids.map((id, i) => ({ id, key: `k${i % 7}` }));
      for (const [i, id] of ids.entries()) if (i % 10 < 3) records.push({ id, key: `k${i % 7}` });
      records.push({ id: ids[0], key: 'k0' }); // the same id a third time, later
      const running = await start(client, topic, groupId, consumer, {
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
      await expectFullyCommitted(topic, groupId);
      await cleanup();
    },
  );

  it('keeps its partitions while a handler runs longer than the session timeout: the group is heartbeated meanwhile', async () => {
    const { topic, cleanup } = await topics(1);
    const groupId = uniqueName('group');
    const slowMs = FAST_GROUP.sessionTimeout + 2_500;
    const { consumer, recorder } = consumerOf(uniqueName('slow'), {
      handler: async (id) => {
        if (id.startsWith('slow-')) await new Promise((resolve) => setTimeout(resolve, slowMs));
      },
    });
    const running = await start(client, topic, groupId, consumer);
    let joins = 0;
    running.consumer.on('consumer.group_join', () => void (joins += 1));
    try {
      const slow = uniqueName('slow-');
      const after = uniqueName('after');
      await produce(topic, [{ id: slow }, { id: after }]);
      await recorder.waitForCount(2, { status: 'processed', timeoutMs: slowMs + 30_000 });
      // Without heartbeats the broker drops the member after sessionTimeout: a rebalance, a rejoin, and the
      // slow record's offset commit refused.
      expect(joins, 'no rejoin while the slow handler ran').toBe(0);
      expect(recorder.events.map((e) => e.outcome.status)).toEqual(['processed', 'processed']);
    } finally {
      await running.stop();
    }
    await expectFullyCommitted(topic, groupId);
    await cleanup();
  }, 60_000);

  it('dead-letters a poison message after maxAttempts with every header, the original key, value and headers', async () => {
    const { topic, dlq, cleanup } = await topics(1);
    const groupId = uniqueName('group');
    const poison = uniqueName('poison');
    const after = uniqueName('after');
    const { consumer, recorder } = consumerOf(uniqueName('poison-consumer'), {
      maxAttempts: 3,
      handler: async (id) => {
        if (id === poison) throw new Error('amount is missing');
      },
    });
    const running = await start(client, topic, groupId, consumer);
    try {
      await produce(topic, [
        { id: poison, key: 'acct-7', value: '{"amount":null}', headers: { traceparent: '00-abc-def-01' } },
        { id: after, key: 'acct-7' },
      ]);
      await recorder.waitFor(after, 'processed', { timeoutMs: 30_000 });
      const [letter, ...more] = await readTopic(kafka, dlq, 1, 10_000);
      expect(more).toEqual([]);
      const outcome = recorder.outcomes(poison).at(-1)!;
      expect(outcome.status).toBe('dead-letter');
      const h = (name: string) => header(letter!, name);
      expect(h(HEADERS.originalId)).toBe(poison);
      expect(h(HEADERS.messageId)).toBe(poison);
      expect(letter!.id).toBe(poison);
      expect(h(HEADERS.consumer)).toBe(consumer.name);
      expect(h(HEADERS.reason)).toBe(outcome.status === 'dead-letter' ? outcome.reason : '');
      expect(h(HEADERS.attempts)).toBe(outcome.status === 'dead-letter' ? String(outcome.attempts) : '');
      expect(h(HEADERS.reason)).toBe('max-attempts');
      expect(h(HEADERS.attempts)).toBe('3');
      expect(h(HEADERS.errorName)).toBe('Error');
      expect(h(HEADERS.errorMessage)).toBe('amount is missing');
      expect(h(HEADERS.errorStack)).toContain('amount is missing');
      expect(h(HEADERS.firstFailureAt)).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(h(HEADERS.lastFailureAt)).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(h(HEADERS.deadLetteredAt)).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(h(HEADERS.sourceTransport)).toBe('kafka');
      expect(h(HEADERS.sourceDestination)).toBe(topic);
      expect(h(HEADERS.sourcePartition)).toBe('0');
      expect(h(HEADERS.sourceOffset)).toBe('0');
      expect(h('traceparent')).toBe('00-abc-def-01');
      expect(Buffer.from(letter!.body as Uint8Array).toString()).toBe('{"amount":null}');
      expect((letter as DeadLetterEntry & { key?: string }).key).toBe('acct-7');
    } finally {
      await running.stop();
    }
    await expectAppliedOnce([after]);
    await expectFullyCommitted(topic, groupId);
    await cleanup();
  });

  it('dead-letters a retried poison message after maxAttempts, keeping the partition order behind it', async () => {
    const { topic, dlq, cleanup } = await topics(1);
    const groupId = uniqueName('group');
    const ids = Array.from({ length: 6 }, (_, i) => uniqueName(`o${i}`));
    const applied: string[] = [];
    const { consumer, recorder } = consumerOf(uniqueName('order'), {
      maxAttempts: 3,
      handler: async (id) => {
        if (id === ids[2]) throw new RetryableError('downstream down');
        applied.push(id);
      },
    });
    const running = await start(client, topic, groupId, consumer);
    try {
      await produce(
        topic,
        ids.map((id) => ({ id, key: 'same' })),
      );
      await recorder.waitFor(ids[5], 'processed', { timeoutMs: 30_000 });
      expect(recorder.outcomes(ids[2]).map((o) => o.status)).toEqual(['retry', 'retry', 'dead-letter']);
      expect(applied).toEqual([ids[0], ids[1], ids[3], ids[4], ids[5]]);
      const letters = await readTopic(kafka, dlq, 1, 10_000);
      expect(letters.map((l) => [l.id, header(l, HEADERS.reason), header(l, HEADERS.attempts)])).toEqual([
        [ids[2], 'max-attempts', '3'],
      ]);
    } finally {
      await running.stop();
    }
    await expectFullyCommitted(topic, groupId);
    await cleanup();
  });

  it('resolves ids from ce_id, then the messageId function, and from coordinates only when opted in', async () => {
    const { topic, dlq, cleanup } = await topics(1);
    const groupId = uniqueName('group');
    const ce = uniqueName('ce');
    const keyed = uniqueName('keyed');
    const { consumer, recorder } = consumerOf(uniqueName('ids'));
    const running = await start(client, topic, groupId, consumer, {
      messageId: (record) => (record.key?.toString().startsWith('by-key') ? keyed : undefined),
    });
    try {
      await produce(topic, [
        { key: 'a', headers: { ce_id: ce } },
        { key: 'by-key-1' },
        { key: 'none', value: '{"orphan":true}' },
      ]);
      await recorder.waitFor(ce, 'processed', { timeoutMs: 30_000 });
      await recorder.waitFor(keyed, 'processed', { timeoutMs: 30_000 });
      await recorder.waitFor(undefined, 'dead-letter', { timeoutMs: 30_000 });
      const letters = await readTopic(kafka, dlq, 1, 10_000);
      expect(letters.map((l) => header(l, HEADERS.reason))).toEqual(['missing-id']);
    } finally {
      await running.stop();
    }
    await expectAppliedOnce([ce, keyed]);

    // With the opt-in, the orphan gets topic:partition:offset as its id (a second consumer, same records).
    const { consumer: second, recorder: secondRecorder } = consumerOf(uniqueName('coordinates'));
    const again = await start(client, topic, uniqueName('group'), second, { useCoordinatesAsId: true });
    try {
      await secondRecorder.waitFor(`${topic}:0:2`, 'processed', { timeoutMs: 30_000 });
    } finally {
      await again.stop();
    }
    await cleanup();
  });

  it('dead-letters tombstones by default with reason tombstone, and skips them when told to', async () => {
    const { topic, dlq, cleanup } = await topics(1);
    const after = uniqueName('after');
    const { consumer, recorder } = consumerOf(uniqueName('tombstones'));
    const groupId = uniqueName('group');
    const running = await start(client, topic, groupId, consumer);
    try {
      await produce(topic, [{ id: uniqueName('gone'), key: 'entity-1', value: null }, { id: after }]);
      await recorder.waitFor(after, 'processed', { timeoutMs: 30_000 });
      const letters = await readTopic(kafka, dlq, 1, 10_000);
      expect(letters.map((l) => [header(l, HEADERS.reason), l.body])).toEqual([['tombstone', null]]);
    } finally {
      await running.stop();
    }
    await expectFullyCommitted(topic, groupId);

    const skipGroup = uniqueName('group');
    const { consumer: skipping, recorder: skipRecorder } = consumerOf(uniqueName('skip'));
    const skipper = await start(client, topic, skipGroup, skipping, { tombstones: 'skip' });
    try {
      await skipRecorder.waitFor(after, 'processed', { timeoutMs: 30_000 });
      expect(skipRecorder.events).toHaveLength(1);
    } finally {
      await skipper.stop();
    }
    await expectFullyCommitted(topic, skipGroup);
    await cleanup();
  });

  it.each([
    { name: 'batch mode', options: { mode: 'batch', batchSize: 100 } },
    { name: 'message mode with 4 keys at once', options: { mode: 'message', keyConcurrency: 4 } },
  ] as const)(
    '$name commits up to the first unfinished record, seeks back to it and keeps order per key',
    async ({ options }) => {
      const { topic, cleanup } = await topics(1);
      const groupId = uniqueName('group');
      const ids = Array.from({ length: 40 }, (_, i) => uniqueName(`b${i}`));
      let failed = false;
      const { consumer, recorder } = consumerOf(uniqueName('batch'), {
        handler: async (id, attempt) => {
          if (id === ids[9] && attempt === 1) {
            failed = true;
            throw new RetryableError('not yet', { delayMs: 300 });
          }
        },
      });
      const keyOf = (i: number) => `k${i % 4}`;
      await produce(
        topic,
        ids.map((id, i) => ({ id, key: keyOf(i) })),
      );
      const running = await start(client, topic, groupId, consumer, options);
      try {
        await recorder.waitForCount(ids.length, { status: 'processed', timeoutMs: 30_000 });
      } finally {
        await running.stop();
      }
      expect(failed).toBe(true);
      // The order effects were applied in: outcomes are reported once committed (a handler may also run in a
      // transaction that rolls back — core reruns a batch with savepoints when one of its records fails).
      const applied = recorder.events
        .filter((e) => e.outcome.status === 'processed')
        .map((e) => e.message.id!);
      for (let k = 0; k < 4; k += 1) {
        const ofKey = (id: string) => keyOf(ids.indexOf(id)) === `k${k}`;
        expect(applied.filter(ofKey)).toEqual(ids.filter(ofKey));
      }
      await expectAppliedOnce(ids);
      await expectFullyCommitted(topic, groupId);
      await cleanup();
    },
  );

  it('commits nothing when the dead-letter produce fails, and retries the record later', async () => {
    const { topic, cleanup } = await topics(1);
    const groupId = uniqueName('group');
    const poison = uniqueName('poison');
    const { consumer, recorder } = consumerOf(uniqueName('dlq-down'), {
      handler: async (id) => {
        if (id === poison) throw new TypeError('permanent by default');
      },
    });
    const running = await start(client, topic, groupId, consumer, {
      deadLetterTopic: () => 'not a valid topic!',
      publishTimeoutMs: 2_000,
    });
    try {
      await produce(topic, [{ id: poison }, { id: uniqueName('behind') }]);
      await recorder.waitForCount(2, { id: poison, status: 'dead-letter', timeoutMs: 30_000 });
      const { committed } = await offsets(topic, groupId);
      expect(committed[0], 'nothing committed past the record whose dead letter failed').toBeLessThanOrEqual(
        0,
      );
      expect(recorder.count('processed')).toBe(0);
    } finally {
      await running.stop();
    }
    await cleanup();
  });

  it('applies every id exactly once with two consumers in one group and rebalances during the run', async () => {
    const { topic, cleanup } = await topics(4);
    const groupId = uniqueName('group');
    const ids = Array.from({ length: 1_200 }, (_, i) => uniqueName(`r${i}`));
    const slow: Handler = async () => new Promise((r) => setTimeout(r, 1));
    const a = consumerOf(uniqueName('rebalance'), { handler: slow });
    const b = idempotentConsumer<unknown, Transaction<unknown>>({
      ...a.consumer.config,
      hooks: { onOutcome: a.recorder.hook },
    });
    const first = await start(client, topic, groupId, a.consumer, { partitionConcurrency: 2 });
    let second: Running | undefined;
    try {
      await produce(
        topic,
        ids.slice(0, 400).map((id, i) => ({ id, key: `k${i}` })),
      );
      await a.recorder.waitForCount(100, { status: SETTLED, timeoutMs: 40_000 });
      second = await start(client, topic, groupId, b, { partitionConcurrency: 2 }); // rebalance: partitions split
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
    await expectFullyCommitted(topic, groupId);
    await cleanup();
  }, 150_000);

  it('stop() called while start() is still joining waits for it and leaves the group', async () => {
    const { topic, cleanup } = await topics(1);
    const groupId = uniqueName('group');
    const { consumer: handler } = consumerOf(uniqueName('early-stop'));
    const { consumer, transport } = unstarted(client, topic, groupId, handler);
    const started = transport.start();
    await transport.stop();
    await started;
    await expect(transport.start()).rejects.toThrow(/already called/);
    const admin = kafka.admin();
    await admin.connect();
    const { groups } = await admin.describeGroups([groupId]);
    await admin.disconnect();
    expect(groups[0]?.members ?? []).toEqual([]);
    await consumer.disconnect();
    await cleanup();
  });
});
