// The replay guarantees of issue #8, proved against one transport on its real broker with a real consumer
// (core's idempotentConsumer on the real Postgres inbox): each dead-lettered message applied once, completed
// ones skipped, a second replay applies nothing, a dry run changes nothing and predicts the real run, `--rate`
// is honoured on an injected clock.

import { appendFileSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../../src/run-cli.js';
import type { ReplaySummary } from '../../src/replay/replay-dead-letters.js';
import { captureIo } from './capture-io.js';
import { eventually } from './eventually.js';
import { effectConsumer, inboxDatabase } from './inbox-database.js';
import type { InboxDatabase } from './inbox-database.js';
import { FakeClock } from './memory-ports.js';
import type { ReplayFixture } from './replay-fixture.js';
import { requireService } from './services.js';

const ids = (n: number, prefix: string): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}-${String(i + 1).padStart(3, '0')}`);

/** Runs `inboxkit <argv> --json` in-process and parses the summary. */
async function cliJson<T>(
  argv: readonly string[],
  options: { clock?: FakeClock } = {},
): Promise<{ code: number; out: T; stderr: string }> {
  const io = captureIo({ env: { USER: 'replay-suite' }, ...(options.clock ? { clock: options.clock } : {}) });
  const code = await runCli([...argv, '--json'], io.io);
  let out: T;
  try {
    out = JSON.parse(io.stdout()) as T;
  } catch {
    throw new Error(
      `inboxkit ${argv.join(' ')} exited ${code} without JSON:\n${io.stdout()}\n${io.stderr()}`,
    );
  }
  return { code, out, stderr: io.stderr() };
}

/**
 * Waits until the DLQ holds `n` messages. A browse (a listing, a dry run) holds RabbitMQ's messages
 * unacknowledged for a moment, and a count taken then reads them as gone: the count is taken once it has let go
 * of them. Still fails when the DLQ holds another number.
 */
const dlqHolds = (f: ReplayFixture, n: number): Promise<void> =>
  eventually(
    async () => (await f.dlqDepth()) === n,
    async () => `DLQ depth ${await f.dlqDepth()}, expected ${n}`,
  );

/** The replay suite for one transport. `makeFixture` builds a fresh source + DLQ per test. */
export function describeReplaySuite(name: string, makeFixture: () => Promise<ReplayFixture>): void {
  describe(`dlq replay on ${name} (real broker, real consumer, real Postgres)`, () => {
    let database: InboxDatabase;
    const fixtures: ReplayFixture[] = [];
    const fixture = async (): Promise<ReplayFixture> => {
      const f = await makeFixture();
      fixtures.push(f);
      return f;
    };
    const dbArgs = (): string[] => [
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      database.schema,
    ];

    beforeAll(async () => {
      database = await inboxDatabase();
    });
    afterAll(async () => {
      for (const f of fixtures) await f.dispose().catch(() => undefined);
      await database?.dispose();
    });

    it(
      'applies each dead-lettered message once and skips completed ones; the dry run predicts it and changes nothing; a second replay applies nothing',
      { timeout: 240_000 },
      async () => {
        const f = await fixture();
        const consumerName = `orders-${f.transport}`;
        const { consumer, recorder, failing } = effectConsumer(database, consumerName);
        const all = ids(100, `${f.transport}-m`);
        all.forEach((id) => failing.add(id));
        await f.start(consumer);
        const t0 = Date.now();
        const step = (what: string): void => {
          if (process.env.CLI_TEST_TRACE)
            appendFileSync(process.env.CLI_TEST_TRACE, `--- ${Date.now() - t0} ms: ${what}\n`);
        };
        await f.publish(all.map((id, i) => ({ id, body: JSON.stringify({ n: i + 1 }) })));
        step('published');
        await recorder.waitForCount(100, { status: 'dead-letter', timeoutMs: 60_000 });
        step('dead-lettered');
        await eventually(
          async () => (await f.dlqDepth()) === 100,
          async () => `DLQ depth ${await f.dlqDepth()}`,
        );
        const snapshot = await f.deadLetters();
        step('const snapshot = await f.deadLetters();');
        expect(new Set(snapshot.map((e) => e.id))).toEqual(new Set(all));

        // An earlier replay applies 30 of them; copies of those 30 then sit in the DLQ again (a crash between
        // publish and remove, or a DLQ restored from a backup), next to the 70 still dead-lettered.
        failing.clear();
        const common = ['--transport', f.transport, '--from', f.dlq, ...f.cliArgs, ...dbArgs()];
        const earlier = await cliJson<ReplaySummary>(['dlq', 'replay', ...common, '--limit', '30']);
        expect(earlier.code).toBe(0);
        expect(earlier.out.replayed).toBe(30);
        const earlierIds = new Set(earlier.out.entries.map((e) => e.id!));
        await recorder.waitForCount(30, { status: 'processed', timeoutMs: 30_000 });
        await f.restore(snapshot.filter((e) => earlierIds.has(e.id!)));
        step('await f.restore(snapshot.filter((e) => e');
        await eventually(
          async () => (await f.dlqDepth()) === 100,
          async () => `DLQ depth ${await f.dlqDepth()}`,
        );

        // Dry run: predicts per message from the inbox, and changes nothing anywhere.
        const before = {
          rows: await database.rows(consumerName),
          effects: await database.effects(),
          source: await f.sourceState(),
          outcomes: recorder.events.length,
        };
        const dry = await cliJson<ReplaySummary>(['dlq', 'replay', ...common, '--dry-run']);
        step('const dry = await cliJson<ReplaySummary>');
        expect(dry.code).toBe(0);
        expect(dry.out.dryRun).toBe(true);
        expect(dry.out.wouldReplay).toBe(100);
        expect(dry.out.predictions).toMatchObject({
          reopen: 70,
          'skip-duplicate': 30,
          process: 0,
          unknown: 0,
        });
        for (const e of dry.out.entries)
          expect(e.prediction).toBe(earlierIds.has(e.id!) ? 'skip-duplicate' : 'reopen');
        expect(await database.rows(consumerName)).toEqual(before.rows);
        expect(await database.effects()).toEqual(before.effects);
        await dlqHolds(f, 100); // once the dry run's browse has let go of them
        expect(new Set((await f.deadLetters()).map((e) => e.id))).toEqual(new Set(all));
        expect(await f.sourceState()).toBe(before.source);
        expect(recorder.events.length).toBe(before.outcomes);

        // The real run does exactly what the dry run said.
        const mark = recorder.events.length;
        const real = await cliJson<ReplaySummary>(['dlq', 'replay', ...common, '--by', 'alice']);
        step('const real = await cliJson<ReplaySummary');
        expect(real.code).toBe(0);
        expect(real.out).toMatchObject({ replayed: 100, failed: 0, unreplayable: 0, requestedBy: 'alice' });
        // Same messages, same predictions (queues without peek may hand them out in another order).
        const byIdSorted = (s: ReplaySummary): [string, string][] =>
          s.entries
            .map((e): [string, string] => [e.id!, e.prediction])
            .sort((a, b) => a[0].localeCompare(b[0]));
        expect(byIdSorted(real.out)).toEqual(byIdSorted(dry.out));
        await recorder.waitForCount(mark + 100, { timeoutMs: 60_000 });
        step('await recorder.waitForCount(mark + 100, ');
        const outcomes = recorder.events.slice(mark);
        const byId = new Map(outcomes.map((e) => [e.id, e.outcome.status]));
        expect(outcomes).toHaveLength(100);
        for (const e of dry.out.entries)
          expect(byId.get(e.id)).toBe(e.prediction === 'reopen' ? 'processed' : 'duplicate');
        const effects = await database.effects();
        expect([...effects.keys()].sort()).toEqual([...all].sort());
        expect([...effects.values()].every((n) => n === 1)).toBe(true);
        await eventually(
          async () => (await f.dlqDepth()) === 0,
          async () => `DLQ depth ${await f.dlqDepth()}`,
        );

        // The audit names the replay and who asked.
        const audit = await database.store.listReplays({ replayId: real.out.replayId, limit: 1_000 });
        expect(audit).toHaveLength(100);
        expect(new Set(audit.map((a) => a.requestedBy))).toEqual(new Set(['alice']));

        // Replaying the same batch again applies nothing more.
        await f.restore(snapshot);
        await eventually(
          async () => (await f.dlqDepth()) === 100,
          async () => `DLQ depth ${await f.dlqDepth()}`,
        );
        const mark2 = recorder.events.length;
        const again = await cliJson<ReplaySummary>(['dlq', 'replay', ...common]);
        step('const again = await cliJson<ReplaySummar');
        expect(again.out).toMatchObject({ replayed: 100, failed: 0 });
        expect(again.out.predictions['skip-duplicate']).toBe(100);
        await recorder.waitForCount(mark2 + 100, { timeoutMs: 60_000 });
        expect(recorder.events.slice(mark2).every((e) => e.outcome.status === 'duplicate')).toBe(true);
        expect(await database.effects()).toEqual(effects);
        await f.stop();
      },
    );

    it('honours --rate, measured on the injected clock', async () => {
      const f = await fixture();
      const { consumer, recorder, failing } = effectConsumer(database, `rate-${f.transport}`);
      const batch = ids(6, `${f.transport}-rate`);
      batch.forEach((id) => failing.add(id));
      await f.start(consumer);
      await f.publish(batch.map((id) => ({ id, body: '{}' })));
      await recorder.waitForCount(6, { status: 'dead-letter', timeoutMs: 30_000 });
      await eventually(
        async () => (await f.dlqDepth()) === 6,
        async () => `DLQ depth ${await f.dlqDepth()}`,
      );
      failing.clear();
      const clock = new FakeClock();
      const run = await cliJson<ReplaySummary>(
        [
          'dlq',
          'replay',
          '--transport',
          f.transport,
          '--from',
          f.dlq,
          ...f.cliArgs,
          ...dbArgs(),
          '--rate',
          '5/s',
        ],
        { clock },
      );
      expect(run.out.replayed).toBe(6);
      // Six publishes at 5/s: five gaps of 200 ms, waited on the injected clock (not the wall clock).
      expect(clock.sleeps.filter((ms) => ms > 0)).toEqual([200, 200, 200, 200, 200]);
      expect(new Date(run.out.finishedAt).getTime() - new Date(run.out.startedAt).getTime()).toBe(1_000);
      await recorder.waitForCount(6, { status: 'processed', timeoutMs: 30_000 });
      await f.stop();
    });

    it('lists the DLQ grouped by reason and error with the inbox status of each id', async () => {
      const f = await fixture();
      const consumerName = `list-${f.transport}`;
      const { consumer, recorder, failing } = effectConsumer(database, consumerName);
      const batch = ids(5, `${f.transport}-list`);
      batch.forEach((id) => failing.add(id));
      await f.start(consumer);
      await f.publish(batch.map((id) => ({ id, body: '{}' })));
      await recorder.waitForCount(5, { status: 'dead-letter', timeoutMs: 30_000 });
      await eventually(
        async () => (await f.dlqDepth()) === 5,
        async () => `DLQ depth ${await f.dlqDepth()}`,
      );
      await f.stop();
      const listed = await cliJson<{
        nonDestructiveBrowse: boolean;
        groups: {
          consumer: string;
          reason: string;
          count: number;
          sampleError: string;
          inboxStatuses: Record<string, number>;
        }[];
      }>(['dlq', 'list', '--transport', f.transport, '--from', f.dlq, ...f.cliArgs, ...dbArgs()]);
      expect(listed.code).toBe(0);
      // Kafka reads a topic and NATS a stream by sequence: neither moves anything.
      expect(listed.out.nonDestructiveBrowse).toBe(f.transport === 'kafka' || f.transport === 'nats');
      expect(listed.out.groups).toEqual([
        expect.objectContaining({
          consumer: consumerName,
          reason: 'permanent-error',
          count: 5,
          inboxStatuses: { dead_lettered: 5 },
          sampleError: expect.stringContaining('on purpose'),
        }),
      ]);
      await dlqHolds(f, 5); // once the listing's browse has let go of them
      const text = captureIo();
      await runCli(
        ['dlq', 'list', '--transport', f.transport, '--from', f.dlq, ...f.cliArgs, ...dbArgs()],
        text.io,
      );
      expect(text.stdout()).toMatch(
        f.transport === 'kafka' || f.transport === 'nats' ? /Read without consuming/ : /cannot peek/,
      );
    });
  });
}
