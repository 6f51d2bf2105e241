// Crash tests with real processes: a consumer SIGKILLed mid-stream and restarted several times applies every
// id exactly once with nothing missing; a crash costs an attempt only to the record that was running, never
// to the records of its batch that were fetched but not started; a message that kills its process on every
// attempt reaches the DLQ (the transport counts an attempt for the first unfinished record on resume), and its
// neighbours do not. Every test runs on each Kafka client: kafkajs and @platformatic/kafka (platformaticKafka()).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { HEADERS } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import type { Kafka, Producer } from 'kafkajs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { connectedProducer, createTopics, readTopic, testKafka, topicSize } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { databaseUrl, kafkaBrokers } from './support/kafka-services.js';
import { schemaName, testDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-consumer.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let kafka: Kafka;
let producer: Producer;
let database: TestDatabase;

let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testKafka();
  producer = await connectedProducer(kafka);
  database = await testDatabase(schemaName(uniqueName('kafka_crash')));
});

afterAll(async () => {
  await producer?.disconnect();
  await database?.dispose();
  releaseBroker?.();
});

interface Child {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly output: () => string;
}

function startConsumer(settings: Record<string, unknown>): Child {
  const child = spawn(
    process.execPath,
    ['--conditions=@inboxkit/source', '--import', 'tsx', FIXTURE, JSON.stringify(settings)],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => {
      if (output.includes('ready')) resolve();
    });
    void exited.then(({ code, signal }) =>
      reject(new Error(`consumer exited (${code ?? signal}) before ready:\n${output}`)),
    );
  });
  ready.catch(() => undefined);
  return { process: child, ready, exited, output: () => output };
}

/** Effects of one test's ids (`<topic>-<n>`): the tests of this file run at once on one effects table. */
async function effectCount(topic: string): Promise<{ rows: number; distinct: number }> {
  const { rows } = await sql<{ rows: number; distinct: number }>`
    SELECT count(*)::int AS rows, count(DISTINCT id)::int AS distinct FROM ${sql.raw(`"${database.schema}".effects`)}
    WHERE id LIKE ${`${topic}-%`}`.execute(database.db);
  return rows[0]!;
}

/** Polls the effects table (the consumer is another process: its outcomes cannot be awaited directly). */
async function waitForEffects(
  topic: string,
  atLeast: number,
  child: Child,
  timeoutMs = 90_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void child.exited.then(() => (exited = true));
  for (;;) {
    const { distinct } = await effectCount(topic);
    if (distinct >= atLeast) return;
    if (exited || Date.now() > deadline)
      throw new Error(`only ${distinct} of ${atLeast} effects; consumer output:\n${child.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Inbox rows of `consumer` that were dead-lettered. */
async function deadLettered(consumer: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ${sql.raw(`"${database.schema}".inbox`)}
    WHERE consumer = ${consumer} AND status = 'dead_lettered'`.execute(database.db);
  return rows[0]!.n;
}

/** The fixture's settings: a fresh group and consumer name per test, `<prefix>-group` and `<prefix>-consumer`. */
function consumerSettings<T extends { mode: 'message' | 'batch'; maxAttempts: number }>(
  client: 'kafkajs' | 'platformatic',
  topic: string,
  prefix: string,
  extra: T,
) {
  return {
    client,
    brokers: kafkaBrokers(),
    databaseUrl: databaseUrl(),
    schema: database.schema,
    topic,
    groupId: uniqueName(`${prefix}-group`),
    consumerName: uniqueName(`${prefix}-consumer`),
    ...extra,
  };
}

async function produce(topic: string, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 500) {
    await producer.send({
      topic,
      acks: -1,
      messages: ids.slice(i, i + 500).map((id, k) => ({
        key: `k${(i + k) % 50}`,
        value: JSON.stringify({ n: i + k }),
        headers: { 'message-id': id },
      })),
    });
  }
}

describe.concurrent.each(['kafkajs', 'platformatic'] as const)(
  'kafkaConsumer on %s in a process that dies',
  (client) => {
    it(
      'applies every id exactly once with nothing missing when SIGKILLed mid-stream three times',
      { timeout: 240_000 },
      async () => {
        const topic = uniqueName('crash');
        const cleanup = await createTopics(kafka, [
          { topic, partitions: 3 },
          { topic: `${topic}.dlq`, partitions: 1 },
        ]);
        const ids = Array.from({ length: 1_000 }, (_, i) => `${topic}-${i}`);
        await produce(topic, ids);
        const settings = consumerSettings(client, topic, 'crash', { mode: 'message', maxAttempts: 5 });
        for (const killAt of [200, 450, 700]) {
          const child = startConsumer(settings);
          await child.ready;
          await waitForEffects(topic, killAt, child);
          child.process.kill('SIGKILL');
          await child.exited;
        }
        const last = startConsumer(settings);
        await last.ready;
        await waitForEffects(topic, ids.length, last);
        last.process.kill('SIGTERM');
        expect(await last.exited).toEqual({ code: 0, signal: null });

        const counts = await database.effectCounts();
        const missing = ids.filter((id) => !counts.has(id));
        const doubled = [...counts].filter(([, n]) => n > 1);
        expect(missing, 'ids never applied').toEqual([]);
        expect(doubled, 'ids applied more than once').toEqual([]);
        expect(await effectCount(topic)).toEqual({ rows: ids.length, distinct: ids.length });
        await cleanup();
      },
    );

    it.each([
      // The handler's second call kills the process: its first record committed, the next one just started, and
      // every record behind that was fetched and never started.
      { mode: 'message', keyConcurrency: 1, killAt: 2 },
      { mode: 'batch', keyConcurrency: 1, killAt: 2 },
      // Four keys at once: the four careful records after the join run alone, then the sixth call kills the
      // process with two records in flight.
      { mode: 'message', keyConcurrency: 4, killAt: 6 },
    ] as const)(
      'applies every record of a fetched batch once, and dead-letters none, when the process dies after its first records five times ($mode mode, keyConcurrency $keyConcurrency)',
      { timeout: 240_000 },
      async ({ mode, keyConcurrency, killAt }) => {
        const topic = uniqueName(`crash-after-first-${mode}`);
        const dlq = `${topic}.dlq`;
        const cleanup = await createTopics(kafka, [
          { topic, partitions: 1 },
          { topic: dlq, partitions: 1 },
        ]);
        const ids = Array.from({ length: 50 }, (_, i) => `${topic}-${i}`);
        await produce(topic, ids);
        const maxAttempts = 5;
        const settings = consumerSettings(client, topic, 'crash-after-first', {
          mode,
          keyConcurrency,
          maxAttempts,
        });
        const batches: string[] = [];
        for (let run = 1; run <= maxAttempts; run += 1) {
          const child = startConsumer({ ...settings, killAtHandlerCall: killAt });
          const exit = await child.exited;
          expect(exit.signal, child.output()).toBe('SIGKILL');
          batches.push(child.output().match(/^batch \d+$/m)?.[0] ?? 'no batch');
        }
        expect(batches[0], 'the first process fetched the 50 records in one batch').toBe('batch 50');
        const before = await effectCount(topic);
        expect(before.rows).toBe(before.distinct);
        expect(before.distinct).toBeGreaterThanOrEqual(
          maxAttempts * (killAt - 1 - (keyConcurrency > 1 ? 1 : 0)),
        );
        expect(before.distinct).toBeLessThan(ids.length);

        const last = startConsumer(settings);
        await last.ready;
        // Settled = applied or dead-lettered: waiting for 50 effects alone would hide dead letters behind a timeout.
        const deadline = Date.now() + 90_000;
        for (;;) {
          const settled = (await effectCount(topic)).distinct + (await deadLettered(settings.consumerName));
          if (settled >= ids.length) break;
          if (Date.now() > deadline)
            throw new Error(`only ${settled} of ${ids.length} settled; consumer output:\n${last.output()}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        last.process.kill('SIGTERM');
        expect(await last.exited).toEqual({ code: 0, signal: null });

        const counts = await database.effectCounts();
        expect(
          ids.filter((id) => counts.get(id) !== 1),
          'ids not applied exactly once',
        ).toEqual([]);
        expect(await deadLettered(settings.consumerName), 'inbox rows dead-lettered').toBe(0);
        expect(await topicSize(kafka, dlq), 'records in the DLQ').toBe(0);
        await cleanup();
      },
    );

    it.each([
      // Message mode: the first death is in steady state, uncounted; from then on the record is the first
      // unfinished one on every resume, charged before it runs: maxAttempts more deaths, then the DLQ.
      { mode: 'message', records: 8, crasher: 2, maxAttempts: 3, fewest: 4, most: 4 },
      // Batch mode: chunks restart small after each join, so the crashing record (31st of a fetched batch of
      // 50) is isolated within a few resumes — not after one resume per record ahead of it in its chunk.
      { mode: 'batch', records: 50, crasher: 30, maxAttempts: 3, fewest: 4, most: 7 },
    ] as const)(
      'dead-letters a message that kills its process on every attempt after $fewest to $most deaths (maxAttempts $maxAttempts, $mode mode), and only that one',
      { timeout: 240_000 },
      async ({ mode, records, crasher: at, maxAttempts, fewest, most }) => {
        const topic = uniqueName(`crashloop-${mode}`);
        const dlq = `${topic}.dlq`;
        const cleanup = await createTopics(kafka, [
          { topic, partitions: 1 },
          { topic: dlq, partitions: 1 },
        ]);
        const ids = Array.from({ length: records }, (_, i) => `${topic}-${i}`);
        const crasher = ids[at]!;
        await produce(topic, ids);
        const settings = consumerSettings(client, topic, 'crashloop', {
          mode,
          maxAttempts,
          crashOnId: crasher,
        });
        let deaths = 0;
        for (;;) {
          const child = startConsumer(settings);
          const outcome = await Promise.race([
            child.exited,
            child.ready.then(() => waitForEffects(topic, ids.length - 1, child)).then(() => 'done' as const),
          ]);
          if (outcome === 'done') {
            child.process.kill('SIGTERM');
            expect(await child.exited).toEqual({ code: 0, signal: null });
            break;
          }
          expect(outcome.signal, child.output()).toBe('SIGKILL');
          deaths += 1;
          expect(deaths, 'the crash loop never reached the DLQ').toBeLessThanOrEqual(most);
        }
        expect(deaths).toBeGreaterThanOrEqual(fewest);
        const letters = await readTopic(kafka, dlq, 1, 10_000);
        expect(letters.map((l) => [l.id, l.headers[HEADERS.reason], l.headers[HEADERS.attempts]])).toEqual([
          [crasher, 'max-attempts', String(maxAttempts)],
        ]);
        const counts = await database.effectCounts();
        expect(ids.filter((id) => id !== crasher).map((id) => counts.get(id))).toEqual(
          ids.slice(0, -1).map(() => 1),
        );
        expect(counts.has(crasher)).toBe(false);
        await cleanup();
      },
    );
  },
);
