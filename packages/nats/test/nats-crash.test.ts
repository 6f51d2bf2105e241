// A consumer process SIGKILLed mid-stream, twice, and restarted: every message is applied exactly once and none
// is missing. The kills land while messages are received, running, or committed but not yet acknowledged;
// JetStream brings back what was not acknowledged after the ack wait and the inbox absorbs what had committed.
// And a message that kills its process on every attempt reaches the DLQ after maxAttempts + 1 deaths — counted by
// the started attempt recorded before each redelivery runs (JetStream's deliveryCount says which are
// redeliveries) — while its neighbours are applied once.

import { fileURLToPath } from 'node:url';

import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import * as crashProcess from '../../../test/support/crash-process.js';
import { requireService, uniqueTestName } from '../../../test/support/services.js';
import { ensureStreams, natsDeadLetterQueue, natsPublisher } from '../src/index.js';
import { testNatsConnection } from './nats-harness.js';
import { effectCounts, openTestDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-consumer.ts', import.meta.url));
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

async function startProcess(
  consumer: string,
  s: Streams,
  extra: { concurrency?: number; maxAttempts?: number; crashOnId?: string } = {},
): Promise<crashProcess.ConsumerProcess> {
  return crashProcess.startConsumerProcess(FIXTURE, {
    natsUrl: requireService('nats').url,
    databaseUrl: t.url,
    schema: t.schema,
    stream: s.stream,
    durable: s.durable,
    deadLetterSubject: s.deadLetterSubject,
    consumer,
    concurrency: extra.concurrency ?? 10,
    ...extra,
  });
}

/** Polls until `condition` holds (a database or stream state, not a message). */
const until = (what: string, condition: () => Promise<boolean>, timeoutMs = 90_000) => crashProcess.until(what, condition, timeoutMs);

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
        await crashProcess.exited(child);
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
      await crashProcess.stopConsumerProcess(last.child);
      crashProcess.expectEachAppliedOnce(ids, await effectCounts(t.db, t.schema, consumer));
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
      const deaths = await crashProcess.deathsUntilDeadLettered({
        start: () => startProcess(consumer, s, { concurrency: 1, maxAttempts, crashOnId: crasher }),
        settled,
        what: 'the stream is settled',
        timeoutMs: 90_000,
        crasher,
        maxAttempts,
      });
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
