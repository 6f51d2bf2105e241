// The partitioned layout deduplicates by the message's own timestamp, whenever a delivery arrives: a
// redelivery after midnight finds the row its first delivery wrote before it; a message 8 days late, one
// stamped days ahead and one without a timestamp each get a partition that their redeliveries find again; and
// after a day is dropped, a redelivery from it meets the late-message rule instead of running twice. The
// database's clock is moved (support/fake-clock.ts), not waited for.

import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../../testing/src/store-conformance.js';
import type { IdempotentConsumerConfig } from '../../src/consumer-types.js';
import { PermanentError } from '../../src/errors.js';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import { maintainInboxPartitions, PostgresInboxStore } from '../../src/postgres/index.js';
import { createFakeClock, type FakeClock } from '../support/fake-clock.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from '../support/postgres.js';

const DAY = 86_400_000;
const utcDay = (at: Date | number): string => new Date(at).toISOString().slice(0, 10);
const compact = (day: string): string => day.replaceAll('-', '');

describe('the partitioned layout, redelivered across days', () => {
  let t: TestDatabase;
  let clock: FakeClock;
  let db: Kysely<TestDB>;
  let n = 0;
  beforeAll(async () => {
    t = await openTestDatabase('partition_redelivery', 4, 'daily-partitions');
    clock = await createFakeClock(t.schema, new Date());
    db = clock.open().db;
  });
  afterAll(async () => {
    await clock?.close();
    await t?.close();
  });

  const store = () => new PostgresInboxStore({ db, schema: t.schema, layout: 'daily-partitions' });
  /** A consumer made now, so its view of the (moved) database clock is fresh. */
  const consumer = (name: string, config: Partial<IdempotentConsumerConfig<unknown, TestTx>> = {}, fail?: (id: string, attempt: number) => void) =>
    idempotentConsumer<unknown, TestTx>({
      name,
      store: store(),
      backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
      handler: async (m, { tx, attempt }) => {
        fail?.(m.id, attempt);
        await insertEffect(tx, t.schema, name, m.id);
      },
      ...config,
    });
  const message = (id: string, timestamp?: Date, extra = {}) => testMessage(id, { id }, { ...(timestamp ? { timestamp } : {}), ...extra });
  const name = (label: string) => `${label}-${++n}`;
  /** The partition holding the row of `id`, and its day. */
  const where = async (consumerName: string, id: string) => {
    const rows = await t.pool.query(
      `SELECT c.relname AS partition, h.day::text AS day FROM "${t.schema}".inbox h JOIN pg_class c ON c.oid = h.tableoid
       WHERE h.consumer = $1 AND h.message_id = $2`,
      [consumerName, id],
    );
    return rows.rows as { partition: string; day: string }[];
  };

  it('finds the row of a message stamped before midnight when it is redelivered after midnight', async () => {
    const c = name('midnight');
    const day = utcDay(Date.now() - DAY);
    const next = utcDay(Date.now());
    const stamped = new Date(`${day}T23:59:59.500Z`);
    let failing = true;
    const fail = (id: string) => {
      if (id === 'retried' && failing) throw new Error('the payment provider timed out');
    };
    await clock.set(new Date(`${day}T23:59:59.800Z`));
    expect(await consumer(c, {}, fail).handle(message('m1', stamped))).toMatchObject({ status: 'processed' });
    expect(await consumer(c, {}, fail).handle(message('retried', stamped))).toMatchObject({ status: 'retry', attempt: 1 });
    expect(await where(c, 'm1')).toEqual([{ partition: `inbox_p${compact(day)}`, day }]);

    await clock.set(new Date(`${next}T00:00:00.200Z`));
    failing = false;
    expect(await consumer(c, {}, fail).handle(message('m1', stamped))).toMatchObject({ status: 'duplicate' });
    expect(await consumer(c, {}, fail).handle(message('retried', stamped))).toMatchObject({ status: 'processed', attempt: 2 });
    expect(await countEffects(t.db, t.schema, c, 'm1')).toBe(1);
    expect(await countEffects(t.db, t.schema, c, 'retried')).toBe(1);
    expect(await where(c, 'retried')).toEqual([{ partition: `inbox_p${compact(day)}`, day }]);
    // The instant of midnight belongs to the new day, whenever it arrives.
    expect(await consumer(c).handle(message('m2', new Date(`${next}T00:00:00.000Z`)))).toMatchObject({ status: 'processed' });
    expect(await where(c, 'm2')).toEqual([{ partition: `inbox_p${compact(next)}`, day: next }]);
  });

  it('keeps a leased message on its day when its lease starts before midnight and completes after', async () => {
    const c = name('leased-midnight');
    const day = utcDay(Date.now() - DAY);
    const next = utcDay(Date.now());
    await clock.set(new Date(`${day}T23:59:59.000Z`));
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
    const stamped = new Date(`${day}T23:58:00.000Z`);
    const first = leased.handle(message('lease-1', stamped));
    await running;
    await clock.set(new Date(`${next}T00:00:10.000Z`));
    expect(await consumer(c).handle(message('lease-1', stamped))).toMatchObject({ status: 'retry', reason: 'lease-held' });
    release();
    expect(await first).toMatchObject({ status: 'processed' });
    expect(await consumer(c).handle(message('lease-1', stamped))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.db, t.schema, c, 'lease-1')).toBe(1);
    expect(await where(c, 'lease-1')).toEqual([{ partition: `inbox_p${compact(day)}`, day }]);
  });

  it('dead-letters a message 8 days late into the default partition, where its replay and redeliveries find it', async () => {
    const c = name('late');
    const now = Date.now();
    await clock.set(new Date(now));
    const stamped = new Date(now - 8 * DAY);
    expect(await consumer(c).handle(message('late-1', stamped))).toMatchObject({ status: 'dead-letter', reason: 'beyond-dedupe-window' });
    expect(await where(c, 'late-1')).toEqual([{ partition: 'inbox_default', day: utcDay(stamped) }]);
    const replay = { replay: { replayId: 'replay-1' } };
    expect(await consumer(c).handle(message('late-1', stamped, replay))).toMatchObject({ status: 'processed' });
    expect(await consumer(c).handle(message('late-1', stamped))).toMatchObject({ status: 'duplicate' });
    expect(await consumer(c).handle(message('late-1', stamped, replay))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.db, t.schema, c, 'late-1')).toBe(1);
    // With latePolicy 'process' it runs, once: its row waits in the default partition as any row would.
    const p = consumer(c, { latePolicy: 'process' });
    expect(await p.handle(message('late-2', stamped))).toMatchObject({ status: 'processed' });
    expect(await p.handle(message('late-2', stamped))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.db, t.schema, c, 'late-2')).toBe(1);
    expect(await where(c, 'late-2')).toEqual([{ partition: 'inbox_default', day: utcDay(stamped) }]);
  });

  it('keeps a message stamped days ahead in the default partition, and its row moves into its day when the day is made', async () => {
    const c = name('ahead');
    const now = Date.now();
    await clock.set(new Date(now));
    const stamped = new Date(now + 8 * DAY);
    expect(await consumer(c).handle(message('ahead-1', stamped))).toMatchObject({ status: 'processed' });
    expect(await where(c, 'ahead-1')).toEqual([{ partition: 'inbox_default', day: utcDay(stamped) }]);
    // Six days later the day is within three days ahead: maintenance makes it and takes the row in.
    await clock.set(new Date(now + 6 * DAY));
    const result = await maintainInboxPartitions({ db }, { schema: t.schema, aheadDays: 3 });
    expect(result.steps).toContainEqual({ action: 'created', day: utcDay(stamped), movedRows: 1 });
    expect(await where(c, 'ahead-1')).toEqual([{ partition: `inbox_p${compact(utcDay(stamped))}`, day: utcDay(stamped) }]);
    expect(await consumer(c).handle(message('ahead-1', stamped))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.db, t.schema, c, 'ahead-1')).toBe(1);
    await clock.set(new Date(now));
  });

  it('finds the row of a replay sent with a new timestamp on another day: a dead letter runs once, a completed message stays a duplicate', async () => {
    const c = name('replay');
    const now = Date.now();
    await clock.set(new Date(now));
    const stamped = new Date(now - 2 * DAY);
    const dead = consumer(c, {}, (id, attempt) => {
      if (id === 'dead-1' && attempt === 1) throw new PermanentError('card declined');
    });
    expect(await dead.handle(message('dead-1', stamped))).toMatchObject({ status: 'dead-letter' });
    expect(await consumer(c).handle(message('done-1', stamped))).toMatchObject({ status: 'processed' });
    // The replay tool publishes without the producer's timestamp: the broker stamps each replay anew.
    const replay = (id: string, replayId: string, at: number) => message(id, new Date(at), { replay: { replayId } });
    expect(await consumer(c).handle(replay('dead-1', 'r-1', now))).toMatchObject({ status: 'processed' });
    expect(await consumer(c).handle(replay('dead-1', 'r-1', now + DAY))).toMatchObject({ status: 'duplicate' });
    expect(await consumer(c).handle(replay('done-1', 'r-1', now))).toMatchObject({ status: 'duplicate', reason: 'replay-of-completed' });
    expect(await countEffects(t.db, t.schema, c, 'dead-1')).toBe(1);
    expect(await countEffects(t.db, t.schema, c, 'done-1')).toBe(1);
    expect((await where(c, 'dead-1')).map((r) => r.day)).toEqual([utcDay(stamped)]); // one row, on the first delivery's day
    // A replayed attempt that fails is recorded on the same row, and the next replay takes it.
    let calls = 0;
    const flaky = consumer(c, {}, (id) => {
      if (id === 'dead-2' && ++calls <= 2) throw new PermanentError('still declined');
    });
    expect(await flaky.handle(message('dead-2', stamped))).toMatchObject({ status: 'dead-letter' });
    expect(await flaky.handle(replay('dead-2', 'r-2', now))).toMatchObject({ status: 'dead-letter' });
    expect(await flaky.handle(replay('dead-2', 'r-3', now + DAY))).toMatchObject({ status: 'processed' });
    expect((await where(c, 'dead-2')).map((r) => r.day)).toEqual([utcDay(stamped)]); // one row, on the first delivery's day
    expect(await countEffects(t.db, t.schema, c, 'dead-2')).toBe(1);
  });

  it('keeps a message without a timestamp in the undated partition, where its redeliveries find it', async () => {
    const c = name('undated');
    await clock.set(new Date());
    expect(await consumer(c).handle(message('undated-1'))).toMatchObject({ status: 'processed' });
    expect(await consumer(c).handle(message('undated-1'))).toMatchObject({ status: 'duplicate' });
    expect(await where(c, 'undated-1')).toEqual([{ partition: 'inbox_undated', day: 'infinity' }]);
  });

  it('drops a day only once it is wholly older than the window, so a later redelivery from it meets the late rule instead of running again', async () => {
    const c = name('dropped');
    const t0 = Date.now();
    await clock.set(new Date(t0));
    const stamped = new Date(t0 - 3_600_000);
    const day = utcDay(stamped);
    expect(await consumer(c).handle(message('old-1', stamped))).toMatchObject({ status: 'processed' });
    // Six days on, the day is still inside the 7-day window: kept, and the redelivery is a duplicate.
    await clock.set(new Date(t0 + 6 * DAY));
    const early = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(early.steps.filter((s) => s.day === day)).toEqual([]);
    expect(early.days).toContain(day);
    expect(await consumer(c).handle(message('old-1', stamped))).toMatchObject({ status: 'duplicate' });
    // Nine days on, the day is dropped; its message is older than the window, so it is refused, not run.
    await clock.set(new Date(t0 + 9 * DAY));
    const late = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(late.steps).toContainEqual({ action: 'dropped', day, movedRows: 0 });
    expect(late.days).not.toContain(day);
    expect(await consumer(c).handle(message('old-1', stamped))).toMatchObject({ status: 'dead-letter', reason: 'beyond-dedupe-window' });
    expect(await countEffects(t.db, t.schema, c, 'old-1')).toBe(1);
    await clock.set(new Date(t0));
  });
});
