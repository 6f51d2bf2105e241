// The schema: Kysely migrations (provider and migrateInbox), the plain SQL file generated from the same source,
// and validated identifiers.

import { readFileSync } from 'node:fs';
import { Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboxSqlFile, SQL_FILE } from '../scripts/generate-sql.js';
import { ConfigurationError } from '../src/errors.js';
import { inboxMigrations, inboxSchemaSql, migrateInbox, resolveInboxTableNames } from '../src/postgres/index.js';
import { openPglite } from './support/pglite.js';
import { openTestDatabase, type TestDatabase } from './support/postgres.js';

describe('inbox schema', () => {
  it('keeps migrations/0001_inbox.sql in step with its source (run packages/core/scripts/generate-sql.ts)', () => {
    expect(readFileSync(SQL_FILE, 'utf8')).toBe(inboxSqlFile());
  });

  it('quotes every identifier and refuses anything but plain names', () => {
    const sqlText = inboxSchemaSql(resolveInboxTableNames({ schema: 'app', table: 'my_inbox' }));
    expect(sqlText).toContain('CREATE TABLE IF NOT EXISTS "app"."my_inbox"');
    expect(sqlText).toContain('"app"."my_inbox_replays"');
    expect(sqlText).toContain('"my_inbox_expires_at_idx"');
    expect(() => resolveInboxTableNames({ table: 'x; DROP TABLE users' })).toThrow(ConfigurationError);
    expect(() => resolveInboxTableNames({ schema: 'a"b' })).toThrow(/plain identifier/);
    expect(() => resolveInboxTableNames({ table: 'a'.repeat(50) })).toThrow(/at most 43 characters/);
    expect(() => resolveInboxTableNames({ table: 'inbox', replayTable: 'inbox' })).toThrow(/differ/);
  });

  describe('on Postgres', () => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await openTestDatabase('migrations');
    });
    afterAll(async () => {
      await t?.close();
    });

    it('migrates with its own migration table, idempotently, and can go down', async () => {
      const schema = `${t.schema}_m`;
      const first = await migrateInbox(t.db, { schema, table: 'events_inbox' });
      expect(first.results?.map((r) => [r.migrationName, r.status])).toEqual([['inboxkit_0001_inbox', 'Success']]);
      const again = await migrateInbox(t.db, { schema, table: 'events_inbox' });
      expect(again.results).toEqual([]);
      const tables = await sql<{ table_name: string }>`
        SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY 1`.execute(t.db);
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        'events_inbox',
        'events_inbox_replays',
        'inboxkit_migrations',
        'inboxkit_migrations_lock',
      ]);
      const migrator = new Migrator({
        db: t.db,
        provider: inboxMigrations({ schema, table: 'events_inbox' }),
        migrationTableSchema: schema,
        migrationTableName: 'inboxkit_migrations',
        migrationLockTableName: 'inboxkit_migrations_lock',
      });
      expect((await migrator.migrateDown()).error).toBeUndefined();
      const after = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = ${schema} AND table_name LIKE 'events_inbox%'`.execute(t.db);
      expect(after.rows[0]!.n).toBe(0);
      await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
    });

    it('creates the same schema from the plain SQL file as from the migrations', async () => {
      const columns = async (schema: string) =>
        (
          await sql<{ c: string }>`
            SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(collation_name, '') AS c
            FROM information_schema.columns WHERE table_schema = ${schema} AND table_name = 'inbox' ORDER BY ordinal_position`.execute(t.db)
        ).rows.map((r) => r.c);
      const fromFile = `${t.schema}_f`;
      const file = readFileSync(SQL_FILE, 'utf8').replaceAll('"inboxkit"', `"${fromFile}"`);
      await sql.raw(file).execute(t.db);
      expect(await columns(fromFile)).toEqual(await columns(t.schema));
      expect((await columns(t.schema)).slice(0, 2)).toEqual(['consumer text NO C', 'message_id text NO C']);
      await sql.raw(`DROP SCHEMA "${fromFile}" CASCADE`).execute(t.db);
    });
  });

  it('migrates PGlite', async () => {
    const p = await openPglite('embedded');
    try {
      const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM embedded.inbox`.execute(p.db);
      expect(r.rows[0]!.n).toBe(0);
    } finally {
      await p.close();
    }
  });
});
