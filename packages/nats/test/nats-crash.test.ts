// A consumer process SIGKILLed mid-stream, twice, and restarted: every message is applied exactly once and none
// is missing. The kills land while messages are received, running, or committed but not yet acknowledged;
// JetStream brings back what was not acknowledged after the ack wait and the inbox absorbs what had committed.
// And a message that kills its process on every attempt reaches the DLQ after maxAttempts + 1 deaths — counted by
// the started attempt recorded before each redelivery runs (JetStream's deliveryCount says which are
// redeliveries) — while its neighbours are applied once.

import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { requireService, uniqueTestName } from '../../../test/support/services.js';
import { ensureStreams, natsDeadLetterQueue, natsPublisher } from '../src/index.js';
import { testNatsConnection } from './nats-harness.js';
import { effectCounts, openTestDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-consumer.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MESSAGES = 600;

interface Streams {
  readonly stream: string;
  readonly subject: string;
  readonly deadLetterStream: string;
  readonly deadLetterSubject: string;
  readonly durable: string;
}

let nc: NatsConnection;
let t: TestDatabase;
const created: Streams[] = [];

async function freshStreams(label: string): Promise<Streams> {
  const base = uniqueTestName(label).replace(/-/g, '_');
  const s = {
    stream: `S_${base}`,
    subject: `crash.${base}`,
    deadLetterStream: `DLQ_${base}`,
    deadLetterSubject: `crash-dlq.${base}`,
    durable: `c_${base}`,
  };
  await ensureStreams({
    connection: nc,
    stream: s.stream,
    subjects: [s.subject],
    deadLetterStream: s.deadLetterStream,
    deadLetterSubject: s.deadLetterSubject,
  });
  created.push(s);
  return s;
}

beforeAll(async () => {
  nc = await testNatsConnection();
  t = await openTestDatabase('crash');
});
afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const s of created) {
    await jsm.streams.delete(s.stream).catch(() => undefined);
    await jsm.streams.delete(s.deadLetterStream).catch(() => undefined);
  }
  await nc?.close();
  await t?.close();
});

type Child = ChildProcessByStdio<null, Readable, Readable>;

async function startProcess(
  consumer: string,
  s: Streams,
  extra: { concurrency?: number; maxAttempts?: number; crashOnId?: string } = {},
): Promise<{ child: Child; output: () => string }> {
  const settings = {
    natsUrl: requireService('nats').url,
    databaseUrl: t.url,
    schema: t.schema,
    stream: s.stream,
    durable: s.durable,
    deadLetterSubject: s.deadLetterSubject,
    consumer,
    concurrency: extra.concurrency ?? 10,
    ...extra,
  };
  const child = spawn(
    process.execPath,
    ['--conditions=@inboxkit/source', '--import', 'tsx', FIXTURE, JSON.stringify(settings)],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => {
      if (out.includes('READY\n')) resolve();
    });
    child.once('exit', (code) =>
      reject(new Error(`consumer process exited with ${String(code)} before READY:\n${err}`)),
    );
  });
  return { child, output: () => out };
}

async function exited(child: Child): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
}

/** Polls until `condition` holds (a database or stream state, not a message). */
async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(25);
  }
}

/** The durable consumer's messages not yet delivered, and delivered but not acknowledged. */
async function unsettled(s: Streams): Promise<{ pending: number; unacked: number }> {
  const info = await (await jetstreamManager(nc)).consumers.info(s.stream, s.durable);
  return { pending: info.num_pending, unacked: info.num_ack_pending };
}

async function deadLetters(s: Streams): Promise<[string | undefined, string | undefined][]> {
  const out: [string | undefined, string | undefined][] = [];
  for await (const e of natsDeadLetterQueue({ connection: nc, stream: s.deadLetterStream }).browse({
    limit: 100,
  }))
    out.push([e.id, e.headers['x-inboxkit-reason']]);
  return out;
}

describe('a NATS consumer process killed mid-stream', () => {
  it(
    'applies every message exactly once after SIGKILLs and restarts, missing none',
    { timeout: 180_000 },
    async () => {
      const s = await freshStreams('crash');
      const consumer = uniqueTestName('crash');
      const ids = Array.from({ length: MESSAGES }, (_, n) => `crash-${n}`);
      await natsPublisher({ connection: nc }).publish(
        ids.map((id) => ({ destination: s.subject, id, body: JSON.stringify({ id }) })),
      );
      const applied = async () => (await effectCounts(t.db, t.schema, consumer)).size;

      const unackedAtKill: number[] = [];
      for (const killAt of [MESSAGES / 4, MESSAGES / 2]) {
        const { child } = await startProcess(consumer, s);
        await until(`${killAt} effects are applied`, async () => (await applied()) >= killAt);
        child.kill('SIGKILL');
        await exited(child);
        unackedAtKill.push((await unsettled(s)).unacked);
      }
      expect(
        unackedAtKill.every((n) => n > 0),
        `messages held by the killed processes: ${String(unackedAtKill)}`,
      ).toBe(true);

      const last = await startProcess(consumer, s);
      await until('every message is applied and settled', async () => {
        const u = await unsettled(s);
        return (await applied()) === MESSAGES && u.pending + u.unacked === 0;
      });
      last.child.kill('SIGTERM');
      await exited(last.child);

      const counts = await effectCounts(t.db, t.schema, consumer);
      expect(
        ids.filter((id) => !counts.has(id)),
        'missing',
      ).toEqual([]);
      expect(
        [...counts].filter(([, n]) => n !== 1),
        'applied more than once',
      ).toEqual([]);
      expect(await deadLetters(s), 'dead letters').toEqual([]);
    },
  );

  it(
    'dead-letters a message that kills its process on every attempt after maxAttempts + 1 deaths, and only that one',
    { timeout: 180_000 },
    async () => {
      const maxAttempts = 2;
      const s = await freshStreams('crashloop');
      const consumer = uniqueTestName('crashloop');
      const ids = Array.from({ length: 6 }, (_, n) => `${consumer}-${n}`);
      const crasher = ids[2]!;
      await natsPublisher({ connection: nc }).publish(
        ids.map((id) => ({ destination: s.subject, id, body: JSON.stringify({ id }) })),
      );
      const settled = async () => {
        const u = await unsettled(s).catch(() => ({ pending: 1, unacked: 1 }));
        return u.pending + u.unacked === 0;
      };
      let deaths = 0;
      for (;;) {
        const { child, output } = await startProcess(consumer, s, {
          concurrency: 1,
          maxAttempts,
          crashOnId: crasher,
        });
        const died = new Promise<'died'>((resolve) => child.once('exit', () => resolve('died')));
        const done = until('the stream is settled', settled, 90_000).then(() => 'done' as const);
        const outcome = await Promise.race([died, done]);
        if (outcome === 'done') {
          child.kill('SIGTERM');
          await exited(child);
          expect(output()).toContain(`OUTCOME dead-letter ${crasher}`);
          break;
        }
        expect(child.signalCode).toBe('SIGKILL');
        deaths += 1;
        expect(deaths, 'the crash loop never reached the DLQ').toBeLessThanOrEqual(maxAttempts + 1);
      }
      // Its first death, on its first delivery, left no trace; every redelivery recorded an attempt first.
      expect(deaths).toBe(maxAttempts + 1);
      const counts = await effectCounts(t.db, t.schema, consumer);
      expect(ids.filter((id) => id !== crasher).map((id) => counts.get(id))).toEqual(
        ids.slice(1).map(() => 1),
      );
      expect(counts.has(crasher)).toBe(false);
      expect(await deadLetters(s)).toEqual([[crasher, 'max-attempts']]);
    },
  );
});
