// A populated plain inbox moved to daily partitions without losing its dedupe history: the migration renames the
// plain tables `<table>_legacy` (their rows carry no message timestamp, so no day can be given them up front),
// each delivery of an old id moves its row into its day first, and maintenance retires the legacy tables once
// every completed row in them has expired, moving the open rows that are left. The database clock is moved.

import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../../testing/src/store-conformance.js';
import { PermanentError } from '../../src/errors.js';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import { maintainInboxPartitions, migrateInbox, PostgresInboxStore, type InboxLayout } from '../../src/postgres/index.js';
import { createFakeClock, type FakeClock } from '../support/fake-clock.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from '../support/postgres.js';

const DAY = 86_400_000;
const utcDay = (at: number): string => new Date(at).toISOString().slice(0, 10);

describe('moving a populated plain inbox to daily partitions', () => {
  let t: TestDatabase;
  let clock: FakeClock;
  let db: Kysely<TestDB>;
  const t0 = Date.now();
  const stamped = new Date(t0 - 2 * 3_600_000);
  beforeAll(async () => {
    t = await openTestDatabase('partition_move', 6);
    clock = await createFakeClock(t.schema, new Date(t0));
    db = clock.open(6).db;
  });
  afterAll(async () => {
    await clock?.close();
    await t?.close();
  });

  const consumer = (layout: InboxLayout) =>
    idempotentConsumer<unknown, TestTx>({
      name: 'orders',
      store: new PostgresInboxStore({ db, schema: t.schema, layout }),
      backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
      handler: async (m, { tx, attempt }) => {
        if (m.id.startsWith('failed') && attempt === 1) throw new Error('the provider timed out');
        if (m.id.startsWith('dead') && m.replay === undefined) throw new PermanentError('card declined');
        await insertEffect(tx, t.schema, 'orders', m.id);
      },
    });
  const message = (id: string, extra = {}) => testMessage(id, { id }, { timestamp: stamped, ...extra });
  const count = async (table: string) =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(`${t.schema}.${table}`)}`.execute(t.db)).rows[0]?.n;
  const where = async (id: string) =>
    (
      await t.pool.query(`SELECT c.relname AS p FROM "${t.schema}".inbox h JOIN pg_class c ON c.oid = h.tableoid WHERE h.consumer = 'orders' AND h.message_id = $1`, [id])
    ).rows.map((r: { p: string }) => r.p);

  it('keeps every id deduplicating, failures retrying and dead letters replaying once, then retires the plain tables', async () => {
    const plain = consumer('table');
    expect(await plain.handle(message('done'))).toMatchObject({ status: 'processed' });
    expect(await plain.handle(testMessage('undated'))).toMatchObject({ status: 'processed' });
    for (const id of ['failed-1', 'failed-2']) expect(await plain.handle(message(id))).toMatchObject({ status: 'retry' });
    for (const id of ['dead-1', 'dead-kept']) expect(await plain.handle(message(id))).toMatchObject({ status: 'dead-letter' });
    await t.pool.query(`INSERT INTO "${t.schema}".inbox (consumer, message_id, status, attempts, changed_at, expires_at)
      SELECT 'orders', 'bulk-' || g, 'completed', 1, now(), now() + interval '7 days' FROM generate_series(1, 2000) g`);

    const migrated = await migrateInbox(t.db, { schema: t.schema, layout: 'daily-partitions' });
    expect(migrated.results?.map((r) => [r.migrationName, r.status])).toEqual([
      ['inboxkit_0003_daily_partitions', 'Success'],
      ['inboxkit_0004_partition_cross_day', 'Success'],
    ]);
    expect(await count('inbox_legacy')).toBe(2006);
    expect(await count('inbox')).toBe(0);

    const partitioned = consumer('daily-partitions');
    // A duplicate is answered from the legacy row (its claim writes nothing, so nothing moves).
    expect(await partitioned.handle(message('done'))).toMatchObject({ status: 'duplicate' });
    expect(await where('done')).toEqual([]);
    expect(await partitioned.handle(testMessage('undated'))).toMatchObject({ status: 'duplicate' });
    for (let i = 1; i <= 50; i++) expect(await partitioned.handle(message(`bulk-${i}`))).toMatchObject({ status: 'duplicate' });
    // An id that runs again moves into its day with its history.
    expect(await partitioned.handle(message('failed-1'))).toMatchObject({ status: 'processed', attempt: 2 });
    expect(await where('failed-1')).toEqual([`inbox_p${utcDay(stamped.getTime()).replaceAll('-', '')}`]);
    // Two deliveries of an old failed id at once: one takes the row over, the other finds it taken.
    const both = await Promise.all([consumer('daily-partitions').handle(message('failed-2')), consumer('daily-partitions').handle(message('failed-2'))]);
    expect(both.filter((o) => o.status === 'processed')).toHaveLength(1);
    const replay = { replay: { replayId: 'r-1' } };
    expect(await partitioned.handle(message('dead-1', replay))).toMatchObject({ status: 'processed' });
    expect(await partitioned.handle(message('dead-1', replay))).toMatchObject({ status: 'duplicate' });
    const [dead] = await new PostgresInboxStore({ db, schema: t.schema, layout: 'daily-partitions' }).findRows('orders', ['dead-1']);
    expect(dead).toMatchObject({ status: 'completed', replayCount: 1 });
    expect(await partitioned.handle(message('new-1'))).toMatchObject({ status: 'processed' });
    for (const id of ['done', 'undated', 'failed-1', 'failed-2', 'dead-1', 'new-1']) expect(await countEffects(t.db, t.schema, 'orders', id)).toBe(1);
    expect(await count('inbox_legacy')).toBe(2006 - 3);

    // The legacy tables stay while a completed row in them still deduplicates…
    expect((await maintainInboxPartitions({ db }, { schema: t.schema })).legacy).toEqual({ status: 'kept', movedRows: 0 });
    // …and go once every one of them expired; the dead letter left in them moves into the partitions.
    await clock.set(new Date(t0 + 8 * DAY));
    const retired = await maintainInboxPartitions({ db }, { schema: t.schema });
    expect(retired.legacy).toEqual({ status: 'retired', movedRows: 1 });
    const tables = await t.pool.query(`SELECT to_regclass($1) IS NULL AS gone`, [`"${t.schema}".inbox_legacy`]);
    expect(tables.rows[0]).toEqual({ gone: true });
    expect(await where('dead-kept')).toEqual(['inbox_default']);
    const late = consumer('daily-partitions');
    expect(await late.handle(message('dead-kept', { replay: { replayId: 'r-2' } }))).toMatchObject({ status: 'processed' });
    expect(await late.handle(message('dead-kept', { replay: { replayId: 'r-2' } }))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.db, t.schema, 'orders', 'dead-kept')).toBe(1);
    expect((await maintainInboxPartitions({ db }, { schema: t.schema })).legacy).toEqual({ status: 'none', movedRows: 0 });
  });
});
