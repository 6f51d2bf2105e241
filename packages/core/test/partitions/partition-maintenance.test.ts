// Partition maintenance on real Postgres: open rows survive the drop of their day (a live lease completes, a
// failure retries, a dead letter replays), the schema's drop function refuses what is not wholly expired, two
// instances at once do each day once, a lock held by a long transaction makes a day wait for the next run, and
// a worker SIGKILLed in the middle of a drop leaves every day whole for the rerun to finish.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../../testing/src/store-conformance.js';
import { PermanentError } from '../../src/errors.js';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import { maintainInboxPartitions, PostgresInboxStore, type PartitionStep } from '../../src/postgres/index.js';
import { createFakeClock, type FakeClock } from '../support/fake-clock.js';
import { countEffects, databaseUrl, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from '../support/postgres.js';

const WORKER = fileURLToPath(new URL('../fixtures/partition-maintenance-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const DAY = 86_400_000;
const utcDay = (at: number): string => new Date(at).toISOString().slice(0, 10);
const compact = (day: string): string => day.replaceAll('-', '');
const range = (from: number, to: number, at: number): string[] =>
  Array.from({ length: to - from + 1 }, (_, i) => utcDay(at + (from + i) * DAY));

describe('partition maintenance', () => {
  let t: TestDatabase;
  let clock: FakeClock;
  let db: Kysely<TestDB>;
  const t0 = Date.now();
  beforeAll(async () => {
    t = await openTestDatabase('partition_maintenance', 4, 'daily-partitions');
    clock = await createFakeClock(t.schema, new Date(t0));
    db = clock.open().db;
  });
  afterAll(async () => {
    await clock?.close();
    await t?.close();
  });

  const store = () => new PostgresInboxStore({ db, schema: t.schema, layout: 'daily-partitions' });
  const message = (id: string, timestamp: Date, extra = {}) => testMessage(id, { id }, { timestamp, ...extra });
  const tables = async (): Promise<string[]> =>
    (await t.pool.query(`SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p') ORDER BY 1`, [t.schema])).rows.map(
      (r: { relname: string }) => r.relname,
    );
  const where = async (consumer: string, id: string) =>
    (
      await t.pool.query(
        `SELECT c.relname AS partition FROM "${t.schema}".inbox h JOIN pg_class c ON c.oid = h.tableoid WHERE h.consumer = $1 AND h.message_id = $2`,
        [consumer, id],
      )
    ).rows.map((r: { partition: string }) => r.partition);

  it('drops an old day while a processing, a failed and a dead-lettered row sit in it: they move to the default partition and carry on there', async () => {
    const c = 'open-rows';
    await clock.set(new Date(t0));
    const stamped = new Date(t0 - 3_600_000);
    const day = utcDay(stamped.getTime());
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const leased = idempotentConsumer<unknown, TestTx>({
      name: c,
      store: store(),
      mode: 'leased',
      leaseMs: 60_000,
      handlerTimeoutMs: 30_000,
      handler: async (m, { tx }) => {
        started();
        await gate;
        await insertEffect(tx, t.schema, c, m.id);
      },
    });
    const transactional = () =>
      idempotentConsumer<unknown, TestTx>({
        name: c,
        store: store(),
        backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
        handler: async (m, { tx, attempt }) => {
          if (m.id === 'failed' && attempt === 1) throw new Error('the provider timed out');
          if (m.id === 'dead' && m.replay === undefined) throw new PermanentError('card declined');
          await insertEffect(tx, t.schema, c, m.id);
        },
      });
    const inFlight = leased.handle(message('processing', stamped));
    await running;
    expect(await transactional().handle(message('failed', stamped))).toMatchObject({ status: 'retry' });
    expect(await transactional().handle(message('dead', stamped))).toMatchObject({ status: 'dead-letter', reason: 'permanent-error' });
    expect(await transactional().handle(message('done', stamped))).toMatchObject({ status: 'processed' });

    await clock.set(new Date(t0 + 9 * DAY));
    const result = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(result.steps).toContainEqual({ action: 'dropped', day, movedRows: 3 });
    const left = await tables();
    expect(left).not.toContain(`inbox_p${compact(day)}`);
    expect(left).not.toContain(`inbox_details_p${compact(day)}`);
    for (const id of ['processing', 'failed', 'dead']) expect(await where(c, id)).toEqual(['inbox_default']);
    expect(await where(c, 'done')).toEqual([]);
    const [dead] = await store().findRows(c, ['dead']);
    expect(dead).toMatchObject({ status: 'dead_lettered', deadLetterReason: 'permanent-error' });

    // The lease's holder completes where its row now is; the failure retries; the dead letter replays once.
    release();
    expect(await inFlight).toMatchObject({ status: 'processed' });
    expect(await transactional().handle(message('failed', stamped))).toMatchObject({ status: 'processed', attempt: 2 });
    const replay = { replay: { replayId: 'r-1' } };
    expect(await transactional().handle(message('dead', stamped, replay))).toMatchObject({ status: 'processed' });
    expect(await transactional().handle(message('dead', stamped, replay))).toMatchObject({ status: 'duplicate' });
    expect(await transactional().handle(message('processing', stamped))).toMatchObject({ status: 'duplicate' });
    for (const id of ['processing', 'failed', 'dead', 'done']) expect(await countEffects(t.db, t.schema, c, id)).toBe(1);
    await clock.set(new Date(t0));
  });

  it('refuses, in the schema itself, to drop a day inside the window or one holding a completed row not yet expired', async () => {
    await clock.set(new Date(t0));
    const today = utcDay(t0);
    const drop = async (day: string, windowMs: number) =>
      (await db.executeQuery<{ answer: string }>({
        sql: `SELECT "${t.schema}".inbox_drop_partition($1::date, $2::float8) AS answer`,
        parameters: [day, windowMs],
        query: { kind: 'RawNode', sqlFragments: [], parameters: [] } as never,
        queryId: { queryId: 'drop' },
      })).rows[0]?.answer;
    const yesterday = utcDay(t0 - DAY);
    for (const day of [today, yesterday]) await t.pool.query(`SELECT "${t.schema}".inbox_add_partition($1::date)`, [day]);
    expect(await drop(today, 7 * DAY)).toBe('within-window');
    await t.pool.query(
      `INSERT INTO "${t.schema}".inbox (consumer, message_id, day, status, attempts, changed_at, expires_at) VALUES ('kept', 'k', $1, 'completed', 1, now(), now() + interval '10 days')`,
      [yesterday],
    );
    await clock.set(new Date(t0 + 3 * DAY));
    expect(await drop(yesterday, 1)).toBe('unexpired');
    expect(await tables()).toContain(`inbox_p${compact(yesterday)}`);
    await clock.set(new Date(t0));
  });

  it('runs as two instances at once without doing a day twice or failing', async () => {
    const at = t0 + 40 * DAY;
    await clock.set(new Date(at));
    const before = (await maintainInboxPartitions({ db }, { schema: t.schema, dryRun: true })).days;
    const runs = await Promise.all(
      ['a', 'b'].map((label) =>
        maintainInboxPartitions({ db: clock.open(2, `maintenance-${label}`).db }, { schema: t.schema }),
      ),
    );
    const steps: PartitionStep[] = runs.flatMap((r) => r.steps);
    const created = steps.filter((s) => s.action === 'created').map((s) => s.day);
    const dropped = steps.filter((s) => s.action === 'dropped').map((s) => s.day);
    const expected = range(-7, 3, at);
    expect([...created].sort()).toEqual(expected);
    expect([...dropped].sort()).toEqual(before.filter((d) => d < utcDay(at - 8 * DAY)).sort());
    expect(steps.filter((s) => s.action === 'busy')).toEqual([]);
    const after = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(after).toMatchObject({ status: 'done', steps: [] });
    expect(after.days).toEqual(expected);
    await clock.set(new Date(t0));
  });

  it('leaves a day for the next run when a long transaction holds the inbox past the lock timeout', async () => {
    const at = t0 + 60 * DAY;
    await clock.set(new Date(at));
    await maintainInboxPartitions({ db }, { schema: t.schema });
    await clock.set(new Date(at + 9 * DAY));
    const holder = new pg.Client({ connectionString: databaseUrl() });
    await holder.connect();
    try {
      await holder.query(`BEGIN; SELECT count(*) FROM "${t.schema}".inbox`);
      const result = await maintainInboxPartitions({ db }, { schema: t.schema, lockTimeoutMs: 200 });
      const drops = result.steps.filter((s) => s.action === 'busy' || s.action === 'dropped');
      expect(drops.length).toBeGreaterThan(0);
      expect(drops.every((s) => s.action === 'busy')).toBe(true);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    const rerun = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(rerun.steps.filter((s) => s.action === 'dropped').length).toBeGreaterThan(0);
    expect(rerun.days).toEqual(range(-7, 3, at + 9 * DAY));
    await clock.set(new Date(t0));
  });

  it('leaves every day whole when the maintaining process is SIGKILLed in the middle of a drop, and the rerun finishes it', async () => {
    const at = t0 + 100 * DAY;
    await clock.set(new Date(at));
    await maintainInboxPartitions({ db }, { schema: t.schema });
    const c = 'crash';
    const stamped = new Date(at - 3_600_000);
    const day = utcDay(stamped.getTime());
    const failing = idempotentConsumer<unknown, TestTx>({
      name: c,
      store: store(),
      handler: async () => {
        throw new Error('down');
      },
    });
    expect(await failing.handle(message('open', stamped))).toMatchObject({ status: 'retry' });
    await clock.set(new Date(at + 9 * DAY));
    // The days of the run's plan made beforehand, so the worker's first step is the drop.
    for (const d of range(-7, 3, at + 9 * DAY)) await t.pool.query(`SELECT "${t.schema}".inbox_add_partition($1::date)`, [d]);
    // The open row's move into the default partition waits on this lock: the worker is then inside the drop,
    // its day detached but nothing committed.
    const holder = new pg.Client({ connectionString: databaseUrl() });
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${t.schema}".inbox_default IN SHARE MODE`);
    const app = `partition-crash-${process.pid}`;
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify({ url: databaseUrl(), schema: t.schema, options: clock.options, applicationName: app })], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    try {
      // Waiting for the lock: the worker's backend blocked inside the drop. (Asked outside the holder's
      // transaction, whose view of pg_stat_activity is a snapshot taken at its first read.)
      for (let i = 0; ; i++) {
        const waiting = await t.pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%inbox_drop_partition%'`,
          [app],
        );
        if (waiting.rowCount === 1) break;
        if (i > 1200 || child.exitCode !== null) throw new Error(`the worker never reached the drop: ${out} ${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    // The backend notices its client is gone once the lock is free, and rolls the drop back.
    for (let i = 0; ; i++) {
      const left = await t.pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1`, [app]);
      if (left.rowCount === 0) break;
      if (i > 600) throw new Error('the killed worker\'s session never ended');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(out).not.toContain('"action":"dropped"');
    const attached = async (parent: string) =>
      (
        await t.pool.query(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass ORDER BY 1`, [
          `"${t.schema}".${parent}`,
        ])
      ).rows.map((r: { relname: string }) => r.relname);
    // Every table of the schema is attached where it belongs (no detached day left behind), the open row once.
    const all = await tables();
    const hot = all.filter((name) => /^inbox_(p\d{8}|default|undated)$/.test(name));
    const details = all.filter((name) => /^inbox_details_(p\d{8}|default|undated)$/.test(name));
    expect(await attached('inbox')).toEqual(hot);
    expect(await attached('inbox_details')).toEqual(details);
    expect(hot).toContain(`inbox_p${compact(day)}`);
    expect(details).toContain(`inbox_details_p${compact(day)}`);
    expect(await where(c, 'open')).toEqual([`inbox_p${compact(day)}`]);
    // The rerun finishes: the day dropped, its open row moved, the days as they should be.
    const rerun = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(rerun.steps).toContainEqual({ action: 'dropped', day, movedRows: 1 });
    expect(await where(c, 'open')).toEqual(['inbox_default']);
    expect(rerun.days).toEqual(range(-7, 3, at + 9 * DAY));
    const [row] = await store().findRows(c, ['open']);
    expect(row).toMatchObject({ status: 'failed', attempts: 1 });
    await clock.set(new Date(t0));
  }, 60_000);
});
