// The schema: Kysely migrations (provider and migrateInbox), the plain SQL files generated from the same source,
// validated identifiers, and the upgrade of a populated version-1 inbox without losing its dedupe history.

import { readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';
import { Migrator, NO_MIGRATIONS } from '../../../test/support/kysely-migrator.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboxSqlFile, LIFECYCLE_SQL_FILE, lifecycleSqlFile, SQL_FILE, V1_SQL_FILE } from '../scripts/generate-sql.js';
import { ConfigurationError, PermanentError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { inboxMigrations, inboxSchemaSql, migrateInbox, PostgresInboxStore, resolveInboxTableNames } from '../src/postgres/index.js';
import { openPglite } from './support/pglite.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

/** Version 1's plain SQL (migrations/0001_inbox.sql) for another schema. */
function version1Sql(schema: string): string {
  return readFileSync(V1_SQL_FILE, 'utf8').replaceAll('"inboxkit"', `"${schema}"`);
}

describe('inbox schema', () => {
  it('keeps migrations/0005_inbox_lean_row.sql in step with its source (run packages/core/scripts/generate-sql.ts)', () => {
    expect(readFileSync(SQL_FILE, 'utf8')).toBe(inboxSqlFile());
  });

  it('keeps migrations/0007_dead_letter_lifecycle.sql in step with its source (run packages/core/scripts/generate-sql.ts)', () => {
    expect(readFileSync(LIFECYCLE_SQL_FILE, 'utf8')).toBe(lifecycleSqlFile());
  });

  it('quotes every identifier and refuses anything but plain names', () => {
    const sqlText = inboxSchemaSql(resolveInboxTableNames({ schema: 'app', table: 'my_inbox' }));
    expect(sqlText).toContain('CREATE TABLE IF NOT EXISTS "app"."my_inbox"');
    expect(sqlText).toContain('"app"."my_inbox_replays"');
    expect(sqlText).toContain('"app"."my_inbox_details"');
    expect(sqlText).toContain('"my_inbox_expires_at_idx"');
    expect(sqlText).toContain('CREATE OR REPLACE FUNCTION "app"."my_inbox_claim"(');
    expect(() => resolveInboxTableNames({ table: 'x; DROP TABLE users' })).toThrow(ConfigurationError);
    expect(() => resolveInboxTableNames({ schema: 'a"b' })).toThrow(/plain identifier/);
    expect(() => resolveInboxTableNames({ table: 'a'.repeat(50) })).toThrow(/at most 43 characters/);
    expect(() => resolveInboxTableNames({ table: 'inbox', replayTable: 'inbox' })).toThrow(/differ/);
    expect(() => resolveInboxTableNames({ table: 'inbox', replayTable: 'inbox_details' })).toThrow(/differ/);
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
      expect(first.results?.map((r) => [r.migrationName, r.status])).toEqual([
        ['inboxkit_0001_inbox', 'Success'],
        ['inboxkit_0002_lean_row', 'Success'],
        ['inboxkit_0005_dead_letter_lifecycle', 'Success'],
      ]);
      const again = await migrateInbox(t.db, { schema, table: 'events_inbox' });
      expect(again.results).toEqual([]);
      const tables = await sql<{ table_name: string }>`
        SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY 1`.execute(t.db);
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        'events_inbox',
        'events_inbox_details',
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
      expect((await migrator.migrateTo(NO_MIGRATIONS)).error).toBeUndefined();
      const after = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = ${schema} AND table_name LIKE 'events_inbox%'`.execute(t.db);
      expect(after.rows[0]!.n).toBe(0);
      const functions = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_proc WHERE pronamespace = ${schema}::regnamespace`.execute(t.db);
      expect(functions.rows[0]!.n).toBe(0);
      await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
    });

    it('lets an inbox made before the dead-letter lifecycle hold discarded and archived rows: 0005, or the plain file 0007', async () => {
      for (const via of ['migration', 'file'] as const) {
        const schema = `${t.schema}_lc_${via}`;
        const migrator = new Migrator({
          db: t.db,
          provider: inboxMigrations({ schema }),
          migrationTableSchema: schema,
          migrationTableName: 'inboxkit_migrations',
          migrationLockTableName: 'inboxkit_migrations_lock',
        });
        await sql.raw(`CREATE SCHEMA "${schema}"`).execute(t.db);
        expect((await migrator.migrateTo('inboxkit_0002_lean_row')).error).toBeUndefined();
        // The check 0002 made before the lifecycle existed.
        await sql.raw(`ALTER TABLE "${schema}".inbox DROP CONSTRAINT inbox_status_check, ADD CONSTRAINT inbox_status_check CHECK (status IN ('processing', 'failed', 'completed', 'dead_lettered'))`).execute(t.db);
        await sql.raw(`INSERT INTO "${schema}".inbox (consumer, message_id, status, attempts, expires_at) VALUES ('c', 'dead', 'dead_lettered', 5, now())`).execute(t.db);
        const retire = () => sql.raw(`UPDATE "${schema}".inbox SET status = 'discarded' WHERE message_id = 'dead'`).execute(t.db);
        await expect(retire()).rejects.toThrow(/inbox_status_check/);
        if (via === 'migration') {
          expect((await migrateInbox(t.db, { schema })).results?.map((r) => [r.migrationName, r.status])).toEqual([
            ['inboxkit_0005_dead_letter_lifecycle', 'Success'],
          ]);
        } else {
          await sql.raw(readFileSync(LIFECYCLE_SQL_FILE, 'utf8').replaceAll('"inboxkit"', `"${schema}"`)).execute(t.db);
        }
        await retire();
        await sql.raw(`UPDATE "${schema}".inbox SET status = 'archived' WHERE message_id = 'dead'`).execute(t.db);
        await expect(sql.raw(`UPDATE "${schema}".inbox SET status = 'gone' WHERE message_id = 'dead'`).execute(t.db)).rejects.toThrow(/inbox_status_check/);
        await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
      }
    });

    it('creates the same schema from the plain SQL files as from the migrations', async () => {
      const columns = async (schema: string, table: string) =>
        (
          await sql<{ c: string }>`
            SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(collation_name, '') AS c
            FROM information_schema.columns WHERE table_schema = ${schema} AND table_name = ${table} ORDER BY ordinal_position`.execute(t.db)
        ).rows.map((r) => r.c);
      const fromFile = `${t.schema}_f`;
      await sql.raw(version1Sql(fromFile)).execute(t.db);
      await sql.raw(readFileSync(SQL_FILE, 'utf8').replaceAll('"inboxkit"', `"${fromFile}"`)).execute(t.db);
      for (const table of ['inbox', 'inbox_details', 'inbox_replays']) {
        expect(await columns(fromFile, table)).toEqual(await columns(t.schema, table));
      }
      expect((await columns(t.schema, 'inbox')).slice(0, 2)).toEqual(['consumer text NO C', 'message_id text NO C']);
      // The hot row: what the claim and the dedupe decision need, no index but its key and the pruner's BRIN.
      expect(await columns(t.schema, 'inbox')).toHaveLength(8);
      const indexes = await sql<{ indexdef: string }>`
        SELECT indexdef FROM pg_indexes WHERE schemaname = ${fromFile} AND tablename = 'inbox' ORDER BY indexname`.execute(t.db);
      expect(indexes.rows.map((r) => r.indexdef.replace(/ ON .*USING/, ' USING'))).toEqual([
        'CREATE INDEX inbox_expires_at_idx USING brin (expires_at)',
        'CREATE UNIQUE INDEX inbox_pkey USING btree (consumer, message_id)',
      ]);
      await sql.raw(`DROP SCHEMA "${fromFile}" CASCADE`).execute(t.db);
    });

    it('upgrades a populated version-1 inbox in place: old completed ids stay duplicates, old dead letters keep their reasons and replay once', async () => {
      const schema = `${t.schema}_v1`;
      await sql.raw(`CREATE SCHEMA "${schema}"`).execute(t.db);
      try {
        // A version-1 database as `inboxkit migrate` left it: the v1 DDL, its migration recorded by Kysely.
        const v1 = new Migrator({
          db: t.db,
          provider: { getMigrations: async () => ({ inboxkit_0001_inbox: { up: (db: Kysely<unknown>) => sql.raw(version1Sql(schema)).execute(db).then(() => undefined) } }) },
          migrationTableSchema: schema,
          migrationTableName: 'inboxkit_migrations',
          migrationLockTableName: 'inboxkit_migrations_lock',
        });
        expect((await v1.migrateToLatest()).error).toBeUndefined();
        await sql.raw(`CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`).execute(t.db);
        const inbox = `"${schema}".inbox`;
        const fp = (id: string) => `(SELECT encode(sha256(convert_to('{"id":"${id}"}', 'UTF8')), 'hex'))`;
        // 2,000 completed rows, a dead letter, a failed row due for its retry, a replayed then completed row.
        await sql
          .raw(
            `INSERT INTO ${inbox} (consumer, message_id, status, fingerprint, attempts, started_attempts, received_at, completed_at, expires_at, claimed_from)
             SELECT 'orders', 'done-' || g, 'completed', NULL, 1, 1, now() - interval '1 hour', now() - interval '1 hour', now() + interval '6 days', 'new'
             FROM generate_series(1, 2000) g;
             INSERT INTO ${inbox} (consumer, message_id, status, fingerprint, attempts, started_attempts, received_at, expires_at, last_error,
               dead_letter_reason, dead_lettered_at, first_failure_at, last_failure_at, claimed_from)
             VALUES ('orders', 'dead-1', 'dead_lettered', ${fp('dead-1')}, 3, 3, now() - interval '2 hours', now() + interval '6 days',
               '{"name":"Error","message":"bad card"}', 'max-attempts', now() - interval '1 hour', now() - interval '2 hours',
               now() - interval '1 hour', 'failed');
             INSERT INTO ${inbox} (consumer, message_id, status, fingerprint, attempts, started_attempts, received_at, available_at, expires_at,
               last_error, first_failure_at, last_failure_at, claimed_from)
             VALUES ('orders', 'failed-1', 'failed', ${fp('failed-1')}, 1, 1, now() - interval '2 hours', now() - interval '1 minute',
               now() + interval '6 days', '{"name":"Error","message":"timeout"}', now() - interval '2 hours', now() - interval '2 hours', 'new');
             INSERT INTO ${inbox} (consumer, message_id, status, fingerprint, attempts, started_attempts, received_at, completed_at, expires_at,
               replay_count, last_replay_id, claimed_from)
             VALUES ('orders', 'replayed-1', 'completed', ${fp('replayed-1')}, 1, 1, now() - interval '3 hours', now() - interval '1 hour',
               now() + interval '6 days', 1, 'r0', 'dead_lettered')`,
          )
          .execute(t.db);

        const upgrade = await migrateInbox(t.db, { schema });
        expect(upgrade.results?.map((r) => [r.migrationName, r.status])).toEqual([
          ['inboxkit_0002_lean_row', 'Success'],
          ['inboxkit_0005_dead_letter_lifecycle', 'Success'],
        ]);
        const counts = await sql<{ rows: number; details: number }>`
          SELECT (SELECT count(*)::int FROM ${sql.table(`${schema}.inbox`)}) AS rows,
                 (SELECT count(*)::int FROM ${sql.table(`${schema}.inbox_details`)}) AS details`.execute(t.db);
        expect(counts.rows[0]).toEqual({ rows: 2003, details: 3 });

        const store = new PostgresInboxStore({ db: t.db, schema });
        const [dead] = await store.listDeadLetters({ consumer: 'orders' });
        expect(dead).toMatchObject({
          messageId: 'dead-1',
          status: 'dead_lettered',
          attempts: 3,
          deadLetterReason: 'max-attempts',
          lastError: { name: 'Error', message: 'bad card' },
          claimedFrom: 'failed',
        });
        expect(dead!.firstFailureAt).toBeInstanceOf(Date);
        const [replayed] = await store.findRows('orders', ['replayed-1']);
        expect(replayed).toMatchObject({ status: 'completed', replayCount: 1, lastReplayId: 'r0' });
        expect(replayed!.completedAt).toBeInstanceOf(Date);

        const message = (id: string, extra: Partial<InboundMessage> = {}): InboundMessage => ({
          id,
          body: JSON.stringify({ id }),
          headers: {},
          source: { transport: 'memory' },
          ...extra,
        });
        const consumer = idempotentConsumer<unknown, TestTx>({
          name: 'orders',
          store,
          handler: async (m, { tx }) => {
            if (m.id === 'poison') throw new PermanentError('still bad');
            await insertEffect(tx, schema, 'orders', m.id);
          },
        });
        const db = t.db;
        for (const id of ['done-1', 'done-2000', 'replayed-1']) expect(await consumer.handle(message(id))).toMatchObject({ status: 'duplicate' });
        const batch = await consumer.handleBatch(['done-7', 'done-8', 'new-1'].map((id) => message(id)));
        expect(batch.map((o) => o.status)).toEqual(['duplicate', 'duplicate', 'processed']);
        expect(await consumer.handle(message('dead-1'))).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
        const replay = { replayId: 'r1' };
        expect(await consumer.handle(message('dead-1', { replay }))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await consumer.handle(message('dead-1', { replay }))).toMatchObject({ status: 'duplicate' });
        expect(await consumer.handle(message('failed-1'))).toMatchObject({ status: 'processed', attempt: 2 });
        expect(await countEffects(db, schema, 'orders')).toBe(3);
        for (const id of ['dead-1', 'failed-1', 'new-1']) expect(await countEffects(db, schema, 'orders', id)).toBe(1);
        const [reopened] = await store.findRows('orders', ['dead-1']);
        expect(reopened).toMatchObject({ status: 'completed', replayCount: 1, lastReplayId: 'r1', claimedFrom: 'dead_lettered' });
        // Running the migrations again changes nothing.
        expect((await migrateInbox(t.db, { schema })).results).toEqual([]);
      } finally {
        await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
      }
    });

    it('upgrades an empty version-1 inbox to the same tables a new database gets', async () => {
      const schema = `${t.schema}_e`;
      await sql.raw(version1Sql(schema)).execute(t.db);
      await sql.raw(readFileSync(SQL_FILE, 'utf8').replaceAll('"inboxkit"', `"${schema}"`)).execute(t.db);
      const dropped = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_attribute WHERE attrelid = ${`"${schema}".inbox`}::regclass AND attisdropped`.execute(t.db);
      expect(dropped.rows[0]!.n).toBe(0);
      await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
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
