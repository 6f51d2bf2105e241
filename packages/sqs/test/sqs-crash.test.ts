// A consumer process SIGKILLed mid-stream, twice, and restarted: every message is applied exactly once and
// none is missing. The kills land while messages are received, running, or committed but not yet deleted;
// SQS brings back what was not deleted after the visibility timeout and the inbox absorbs what had committed.
// And a message that kills its process on every attempt reaches the DLQ — counted by the started attempt
// recorded before each redelivery runs, not by ApproximateReceiveCount — while its neighbours are applied once.
// And a process killed as soon as it applies anything, six times over, costs one attempt per kill at most: the
// redelivered messages that may have crashed (crash suspects) run one at a time.

import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { uniqueName } from '@inboxkit/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  deathsUntilDeadLettered,
  expectEachAppliedOnce,
  exited,
  startConsumerProcess,
  stopConsumerProcess,
  until as untilState,
} from '../../../test/support/crash-process.js';
import type { ConsumerProcess } from '../../../test/support/crash-process.js';
import { sqsDeadLetterQueue, sqsPublisher } from '../src/index.js';
import type { CreatedQueues } from '../src/index.js';
import { effectCounts, openTestDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';
import { deleteQueues, freshQueues, sqsEndpoint, testSqsClient } from './support/sqs-test-client.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-consumer.ts', import.meta.url));
const MESSAGES = 600;

let client: SQSClient;
let t: TestDatabase;
let q: CreatedQueues;

beforeAll(async () => {
  client = testSqsClient();
  t = await openTestDatabase('crash');
  q = await freshQueues(client, 'crash', { maxAttempts: 10 });
});
afterAll(async () => {
  await deleteQueues(client, q);
  client.destroy();
  await t?.close();
});

/** Starts a consumer process; resolves once it polls. */
async function startProcess(
  consumer: string,
  extra: {
    queues?: CreatedQueues;
    concurrency?: number;
    maxAttempts?: number;
    crashOnId?: string;
    handlerDelayMs?: number;
    handlerJitterMs?: number;
    prefetch?: number;
    mode?: 'message' | 'batch';
  } = {},
): Promise<ConsumerProcess> {
  const { queues = q, concurrency = 10, ...rest } = extra;
  return startConsumerProcess(FIXTURE, {
    sqsEndpoint: sqsEndpoint(),
    databaseUrl: t.url,
    schema: t.schema,
    queueUrl: queues.queueUrl,
    deadLetterQueueUrl: queues.deadLetterQueueUrl,
    consumer,
    concurrency,
    ...rest,
  });
}

/** Polls until `condition` holds (a database or queue state, not a message). */
const until = (what: string, condition: () => Promise<boolean>, timeoutMs = 60_000) => untilState(what, condition, timeoutMs);

async function depth(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
  const { Attributes: a = {} } = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(a.ApproximateNumberOfMessages),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible),
  };
}

describe('a consumer process killed mid-batch', () => {
  it(
    'applies every message exactly once after SIGKILLs and restarts, missing none',
    { timeout: 120_000 },
    async () => {
      const consumer = uniqueName('crash');
      const ids = Array.from({ length: MESSAGES }, (_, n) => `crash-${n}`);
      await sqsPublisher({ client }).publish(
        ids.map((id) => ({ destination: q.queueUrl, id, body: JSON.stringify({ id }) })),
      );
      const applied = async () => (await effectCounts(t.db, t.schema, consumer)).size;

      const inFlightAtKill: number[] = [];
      for (const killAt of [MESSAGES / 4, MESSAGES / 2]) {
        const { child } = await startProcess(consumer);
        await until(`${killAt} effects are applied`, async () => (await applied()) >= killAt);
        child.kill('SIGKILL');
        await exited(child);
        inFlightAtKill.push((await depth(q.queueUrl)).inFlight);
      }
      expect(
        inFlightAtKill.every((n) => n > 0),
        `messages held by the killed processes: ${String(inFlightAtKill)}`,
      ).toBe(true);

      const last = await startProcess(consumer);
      await until(
        'every message is applied and the queue is empty',
        async () =>
          (await applied()) === MESSAGES &&
          (await depth(q.queueUrl)).inFlight + (await depth(q.queueUrl)).visible === 0,
      );
      await stopConsumerProcess(last.child);
      expectEachAppliedOnce(ids, await effectCounts(t.db, t.schema, consumer));
      expect(await depth(q.deadLetterQueueUrl)).toEqual({ visible: 0, inFlight: 0 });
      // The restarted process met messages whose effect had committed before the kill: absorbed as duplicates.
      const outcomes = last
        .output()
        .split('\n')
        .filter((l) => l.startsWith('OUTCOME '));
      expect(
        outcomes.filter((l) => l.startsWith('OUTCOME dead-letter')),
        'dead letters',
      ).toEqual([]);
    },
  );

  it(
    'dead-letters a message that kills its process on every attempt after maxAttempts + 1 deaths, and only that one',
    { timeout: 120_000 },
    async () => {
      const maxAttempts = 2;
      const loop = await freshQueues(client, 'crashloop', { maxAttempts, headroom: 10 });
      try {
        const consumer = uniqueName('crashloop');
        const ids = Array.from({ length: 6 }, (_, n) => `${consumer}-${n}`);
        const crasher = ids[2]!;
        await sqsPublisher({ client }).publish(
          ids.map((id) => ({ destination: loop.queueUrl, id, body: JSON.stringify({ id }) })),
        );
        const settled = async () => {
          const d = await depth(loop.queueUrl);
          return d.visible + d.inFlight === 0;
        };
        const deaths = await deathsUntilDeadLettered({
          start: () => startProcess(consumer, { queues: loop, concurrency: 1, maxAttempts, crashOnId: crasher }),
          settled,
          what: 'the queue is empty',
          timeoutMs: 60_000,
          crasher,
          maxAttempts,
        });
        // Its first death, on its first receive, left no trace; every later receive recorded an attempt first.
        expect(deaths).toBe(maxAttempts + 1);
        const counts = await effectCounts(t.db, t.schema, consumer);
        expect(ids.filter((id) => id !== crasher).map((id) => counts.get(id))).toEqual(
          ids.slice(1).map(() => 1),
        );
        expect(counts.has(crasher)).toBe(false);
        const letters = [];
        const dlq = sqsDeadLetterQueue({ client, queueUrl: loop.deadLetterQueueUrl, waitTimeSeconds: 1 });
        for await (const entry of dlq.browse({ limit: 10 })) letters.push(entry);
        await dlq.close();
        expect(letters.map((l) => [l.id, l.headers['x-inboxkit-reason']])).toEqual([
          [crasher, 'max-attempts'],
        ]);
      } finally {
        await deleteQueues(client, loop);
      }
    },
  );
});

describe('a process killed as soon as it applies anything, six times over', () => {
  // Each round's process receives what the previous one held again, redelivered (receive count above 1): it
  // may have been running when its process died, so it is charged a started attempt just before it runs. Run
  // together, every redelivery running at a kill is charged for it, and the slow ones again at each kill (with
  // maxAttempts 2 the first consumer dead-lettered 2 or 3 of these 24 healthy ids). A crash suspect runs alone
  // instead: a kill charges one attempt at most. Every id here is healthy and runs to its end once, so each
  // attempt its completed row counts beyond the first is one a kill charged.
  it.each([
    { variant: 'message mode', mode: 'message', fifo: false },
    { variant: 'batch mode', mode: 'batch', fifo: false },
    { variant: 'a FIFO queue (six groups)', mode: 'message', fifo: true },
  ] as const)(
    'charges one attempt per kill at most, dead-letters nothing, applies every id once: $variant (four handlers of 100–600 ms)',
    { timeout: 180_000 },
    async ({ mode, fifo }) => {
      // Room for every charge, so that the charges can be counted; and headroom enough that SQS's own redrive
      // (maxReceiveCount) never moves a message.
      const maxAttempts = 10;
      const kills = 6;
      const busy = await freshQueues(client, 'busykill', { maxAttempts, headroom: 30, fifo });
      try {
        const consumer = uniqueName('busykill');
        const ids = Array.from({ length: 24 }, (_, n) => `${consumer}-${n}`);
        await sqsPublisher({ client }).publish(
          ids.map((id, n) => ({
            destination: busy.queueUrl,
            id,
            ...(fifo ? { key: `group-${n % 6}` } : {}),
            body: JSON.stringify({ id }),
          })),
        );
        const applied = async () => (await effectCounts(t.db, t.schema, consumer)).size;
        const deadLettered = async () => {
          const d = await depth(busy.deadLetterQueueUrl);
          return d.visible + d.inFlight;
        };
        const outputs: string[] = [];
        const runningAtKill: number[] = [];
        const heldAtKill: number[] = [];
        for (let round = 1; round <= kills; round += 1) {
          // What the previous process held is visible again (its visibility timeout ran out), so this process
          // receives it, redelivered, beside fresh messages.
          await until(
            `round ${round}: nothing held`,
            async () => (await depth(busy.queueUrl)).inFlight === 0,
          );
          // Four handlers of 100–600 ms: a kill right after the first effect commits finds the others running
          // (in batch mode, the next batch started and charged).
          const { child, output } = await startProcess(consumer, {
            queues: busy,
            concurrency: 4,
            maxAttempts,
            mode,
            handlerDelayMs: 100,
            handlerJitterMs: 500,
          });
          const before = await applied();
          await until(
            `round ${round}: one more effect`,
            async () => (await applied()) > before || (await deadLettered()) > 0,
          );
          if (round === 1 && mode === 'message') {
            // The first kill must find several handlers running (asserted below). On a loaded machine the
            // others may not have started yet when the first effect commits: the process kills itself at the
            // first moment when two run (SIGUSR2), or is killed anyway after the deadline, and the check fails.
            const deadline = new AbortController();
            child.kill('SIGUSR2');
            await Promise.race([
              exited(child),
              sleep(60_000, undefined, { signal: deadline.signal }).catch(() => undefined),
            ]);
            deadline.abort();
            child.kill('SIGKILL');
          } else {
            child.kill('SIGKILL');
          }
          await exited(child);
          expect(child.signalCode).toBe('SIGKILL');
          heldAtKill.push((await depth(busy.queueUrl)).inFlight);
          const lines = output().split('\n');
          runningAtKill.push(
            lines.filter((l) => l.startsWith('RUN ')).length -
              lines.filter((l) => l.startsWith('END ')).length,
          );
          outputs.push(output());
        }
        const atKills = `handlers running at each kill: ${String(runningAtKill)}; messages held: ${String(heldAtKill)}`;
        // The first round's process held fresh messages only: its kill found several in hand, and (one
        // handler call after another in a batch's transaction) several running outside batch mode.
        expect(heldAtKill[0], atKills).toBeGreaterThan(1);
        if (mode === 'message') expect(runningAtKill[0], atKills).toBeGreaterThan(1);

        const last = await startProcess(consumer, { queues: busy, concurrency: 4, maxAttempts, mode });
        await until(
          'every message is settled and the queue is empty',
          async () => {
            const d = await depth(busy.queueUrl);
            return d.visible + d.inFlight === 0 && (await applied()) + (await deadLettered()) >= ids.length;
          },
          120_000,
        );
        last.child.kill('SIGTERM');
        await exited(last.child);
        outputs.push(last.output());

        const letters = [];
        const dlq = sqsDeadLetterQueue({ client, queueUrl: busy.deadLetterQueueUrl, waitTimeSeconds: 1 });
        for await (const entry of dlq.browse({ limit: 30 })) letters.push(entry);
        await dlq.close();
        const deadLetterOutcomes = outputs
          .flatMap((o) => o.split('\n'))
          .filter((l) => l.startsWith('OUTCOME dead-letter'));
        expect(
          {
            dlq: letters.map((l) => `${String(l.id)} ${String(l.headers['x-inboxkit-reason'])}`),
            outcomes: deadLetterOutcomes,
          },
          `healthy messages dead-lettered (${atKills})`,
        ).toEqual({ dlq: [], outcomes: [] });
        const counts = await effectCounts(t.db, t.schema, consumer);
        expect(
          ids.filter((id) => counts.get(id) !== 1),
          'ids not applied exactly once',
        ).toEqual([]);
        const rows = await new PostgresInboxStore({ db: t.db, schema: t.schema }).findRows(consumer, ids);
        expect(rows.map((r) => r.status)).toEqual(ids.map(() => 'completed'));
        const charged = rows.filter((r) => r.attempts > 1).map((r) => `${r.messageId}: ${r.attempts - 1}`);
        const charges = rows.reduce((sum, r) => sum + r.attempts - 1, 0);
        expect(
          charges,
          `attempts charged by ${kills} kills (${charged.join(', ')}; ${atKills})`,
        ).toBeLessThanOrEqual(kills);
      } finally {
        await deleteQueues(client, busy);
      }
    },
  );
});
