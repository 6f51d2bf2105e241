// The partitioned layout's schema: the Kysely migration and the plain SQL file generated from the same source,
// the partitions it starts with, the upgrade of an inbox partitioned before the cross-day check, and the refusal
// to convert a populated plain inbox by migration alone.

import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { Migrator } from '../../../../test/support/kysely-migrator.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionedSqlFile, PARTITIONED_SQL_FILE, SQL_FILE } from '../../scripts/generate-sql.js';
import { inboxMigrations, migrateInbox } from '../../src/postgres/index.js';
import { openTestDatabase, type TestDatabase } from '../support/postgres.js';

describe('the partitioned layout schema', () => {
  it('keeps migrations/0006_inbox_daily_partitions.sql in step with its source (run packages/core/scripts/generate-sql.ts)', () => {
    expect(readFileSync(PARTITIONED_SQL_FILE, 'utf8')).toBe(partitionedSqlFile());
  });

  describe('on Postgres', () => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await openTestDatabase('partition_migrations');
    });
    afterAll(async () => {
      await t?.close();
    });

    /** The partitions of `schema.table` with their bounds, by name. */
    const partitions = async (schema: string, table: string): Promise<string[]> =>
      (
        await sql<{ p: string }>`
          SELECT c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid) AS p FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = ${`"${schema}"."${table}"`}::regclass ORDER BY c.relname`.execute(t.db)
      ).rows.map((r) => r.p);

    const utcDay = (offsetDays: number): string => new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

    it('migrates to daily partitions: the hot table and its details partitioned by day, a week back to three days ahead', async () => {
      const schema = `${t.schema}_p`;
      const result = await migrateInbox(t.db, { schema, layout: 'daily-partitions' });
      expect(result.results?.map((r) => [r.migrationName, r.status])).toEqual([
        ['inboxkit_0001_inbox', 'Success'],
        ['inboxkit_0002_lean_row', 'Success'],
        ['inboxkit_0003_daily_partitions', 'Success'],
        ['inboxkit_0004_partition_cross_day', 'Success'],
        ['inboxkit_0005_dead_letter_lifecycle', 'Success'],
      ]);
      expect((await migrateInbox(t.db, { schema, layout: 'daily-partitions' })).results).toEqual([]);
      const kinds = await sql<{ relname: string; relkind: string }>`
        SELECT relname, relkind FROM pg_class WHERE relnamespace = ${schema}::regnamespace AND relname IN ('inbox', 'inbox_details', 'inbox_replays')
        ORDER BY relname`.execute(t.db);
      expect(kinds.rows).toEqual([
        { relname: 'inbox', relkind: 'p' },
        { relname: 'inbox_details', relkind: 'p' },
        { relname: 'inbox_replays', relkind: 'r' },
      ]);
      const days = Array.from({ length: 11 }, (_, i) => utcDay(i - 7));
      const expected = (prefix: string) => [
        `${prefix}_default DEFAULT`,
        ...days.map((d, i) => `${prefix}_p${d.replaceAll('-', '')} FOR VALUES FROM ('${d}') TO ('${days[i + 1] ?? utcDay(4)}')`),
        `${prefix}_undated FOR VALUES FROM ('infinity') TO (MAXVALUE)`,
      ];
      expect(await partitions(schema, 'inbox')).toEqual(expected('inbox'));
      expect(await partitions(schema, 'inbox_details')).toEqual(expected('inbox_details'));
      const key = await sql<{ def: string }>`
        SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = ${`"${schema}".inbox`}::regclass AND contype = 'p'`.execute(t.db);
      expect(key.rows[0]?.def).toBe('PRIMARY KEY (consumer, message_id, day)');
      await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
    });

    it('creates the same partitioned schema from the plain SQL files (0005, then 0006) as from the migrations', async () => {
      const fromMigrations = `${t.schema}_pm`;
      const fromFiles = `${t.schema}_pf`;
      await migrateInbox(t.db, { schema: fromMigrations, layout: 'daily-partitions' });
      for (const file of [SQL_FILE, PARTITIONED_SQL_FILE]) {
        await sql.raw(readFileSync(file, 'utf8').replaceAll('"inboxkit"', `"${fromFiles}"`)).execute(t.db);
      }
      const shape = async (schema: string) =>
        (
          await sql<{ c: string }>`
            SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable AS c FROM information_schema.columns
            WHERE table_schema = ${schema} AND table_name LIKE 'inbox%' AND table_name NOT LIKE 'inboxkit%' ORDER BY table_name, ordinal_position`.execute(t.db)
        ).rows.map((r) => r.c);
      expect(await shape(fromFiles)).toEqual(await shape(fromMigrations));
      expect(await partitions(fromFiles, 'inbox')).toEqual(await partitions(fromMigrations, 'inbox'));
      await sql.raw(`DROP SCHEMA "${fromMigrations}" CASCADE; DROP SCHEMA "${fromFiles}" CASCADE`).execute(t.db);
    });

    /** The claim, failure and start functions of `schema`, with their parameter types. */
    const functions = async (schema: string): Promise<string[]> =>
      (
        await sql<{ f: string }>`
          SELECT proname || '(' || pg_get_function_identity_arguments(oid) || ')' AS f FROM pg_proc
          WHERE pronamespace = ${schema}::regnamespace AND proname IN ('inbox_claim', 'inbox_fail', 'inbox_start') ORDER BY proname`.execute(t.db)
      ).rows.map((r) => r.f.replaceAll(/p_\w+ /g, ''));

    it('gives an inbox partitioned before the cross-day check its functions in 0004, one per name', async () => {
      const schema = `${t.schema}_pc`;
      await sql.raw(`CREATE SCHEMA "${schema}"`).execute(t.db);
      const migrator = new Migrator({
        db: t.db,
        provider: inboxMigrations({ schema, layout: 'daily-partitions' }),
        migrationTableSchema: schema,
        migrationTableName: 'inboxkit_migrations',
        migrationLockTableName: 'inboxkit_migrations_lock',
      });
      expect((await migrator.migrateTo('inboxkit_0003_daily_partitions')).error).toBeUndefined();
      // The functions 0003 made before the check: the plain layout's signatures, and `_start` with timestamps.
      const claim = 'text, text, text, timestamptz, int, text, int, float8, text, uuid, float8';
      const fail = 'text, text, text, timestamptz, int, jsonb, text, float8, float8, uuid, text, boolean';
      for (const [fn, args] of [['claim', claim], ['fail', fail], ['start', 'text, text[], float8, timestamptz[]']] as const) {
        await sql.raw(`DROP FUNCTION "${schema}".inbox_${fn}; CREATE FUNCTION "${schema}".inbox_${fn}(${args}) RETURNS text LANGUAGE sql AS 'SELECT NULL::text'`).execute(t.db);
      }
      expect((await migrateInbox(t.db, { schema, layout: 'daily-partitions' })).results?.map((r) => [r.migrationName, r.status])).toEqual([
        ['inboxkit_0004_partition_cross_day', 'Success'],
        ['inboxkit_0005_dead_letter_lifecycle', 'Success'],
      ]);
      expect(await functions(schema)).toEqual([
        'inbox_claim(text, text, text, timestamp with time zone, integer, text, integer, double precision, text, uuid, double precision, timestamp with time zone, boolean)',
        'inbox_fail(text, text, text, timestamp with time zone, integer, jsonb, text, double precision, double precision, uuid, text, boolean, timestamp with time zone, boolean)',
        'inbox_start(text, text[], double precision, timestamp with time zone[], boolean)',
      ]);
      await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
    });

    it('gives an inbox partitioned before the dead-letter lifecycle the wider status check on every partition in 0005', async () => {
      const schema = `${t.schema}_pl`;
      await sql.raw(`CREATE SCHEMA "${schema}"`).execute(t.db);
      const migrator = new Migrator({
        db: t.db,
        provider: inboxMigrations({ schema, layout: 'daily-partitions' }),
        migrationTableSchema: schema,
        migrationTableName: 'inboxkit_migrations',
        migrationLockTableName: 'inboxkit_migrations_lock',
      });
      expect((await migrator.migrateTo('inboxkit_0004_partition_cross_day')).error).toBeUndefined();
      await sql.raw(`ALTER TABLE "${schema}".inbox DROP CONSTRAINT inbox_status_check, ADD CONSTRAINT inbox_status_check CHECK (status IN ('processing', 'failed', 'completed', 'dead_lettered'))`).execute(t.db);
      const day = utcDay(-1);
      await sql.raw(`INSERT INTO "${schema}".inbox (consumer, message_id, day, status, attempts, expires_at) VALUES ('c', 'dead', '${day}', 'dead_lettered', 5, now()), ('c', 'old', '1999-01-01', 'dead_lettered', 5, now())`).execute(t.db);
      const retire = () => sql.raw(`UPDATE "${schema}".inbox SET status = 'discarded' WHERE consumer = 'c'`).execute(t.db);
      await expect(retire()).rejects.toThrow(/inbox_status_check/);
      expect((await migrateInbox(t.db, { schema, layout: 'daily-partitions' })).results?.map((r) => [r.migrationName, r.status])).toEqual([
        ['inboxkit_0005_dead_letter_lifecycle', 'Success'],
      ]);
      await retire();
      const statuses = await sql<{ p: string; status: string }>`
        SELECT c.relname AS p, h.status FROM ${sql.table(`${schema}.inbox`)} h JOIN pg_class c ON c.oid = h.tableoid ORDER BY 1`.execute(t.db);
      expect(statuses.rows).toEqual([
        { p: 'inbox_default', status: 'discarded' },
        { p: `inbox_p${day.replaceAll('-', '')}`, status: 'discarded' },
      ]);
      await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
    });
  });
});
