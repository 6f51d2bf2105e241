// The SIGKILL crash test of kafka-crash.test.ts with the consumer process on @platformatic/kafka
// (fixtures/platformatic-crash-consumer.ts): killed mid-stream three times and restarted, it applies every id
// exactly once with nothing missing. Records are produced with kafkajs, an observer independent of the adapter.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { uniqueName } from '@inboxkit/testing';
import type { Kafka, Producer } from 'kafkajs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { connectedProducer, createTopics, testKafka } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { databaseUrl, kafkaBrokers } from './support/kafka-services.js';
import { schemaName, testDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/platformatic-crash-consumer.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let kafka: Kafka;
let producer: Producer;
let database: TestDatabase;

let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testKafka();
  producer = await connectedProducer(kafka);
  database = await testDatabase(schemaName(uniqueName('plt_crash')));
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

describe('kafkaConsumer on @platformatic/kafka in a process that dies', () => {
  it(
    'applies every id exactly once with nothing missing when SIGKILLed mid-stream three times',
    { timeout: 240_000 },
    async () => {
      const topic = uniqueName('plt-crash');
      const cleanup = await createTopics(kafka, [
        { topic, partitions: 3 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      const ids = Array.from({ length: 1_000 }, (_, i) => `${topic}-${i}`);
      await produce(topic, ids);
      const settings = {
        brokers: kafkaBrokers(),
        databaseUrl: databaseUrl(),
        schema: database.schema,
        topic,
        groupId: uniqueName('crash-group'),
        consumerName: uniqueName('crash-consumer'),
        mode: 'message',
        maxAttempts: 5,
      };
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
});
