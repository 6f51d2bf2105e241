// migrateIdempotencyKeys on Postgres: its own migration table, idempotent, and down again.

import { sql } from 'kysely';
import { Migrator } from '../../../test/support/kysely-migrator.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeyMigrations, migrateIdempotencyKeys } from '../src/index.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;

beforeAll(async () => {
  t = await openHttpTestDatabase('http_migrations');
});

afterAll(async () => {
  await t?.close();
});

describe('migrateIdempotencyKeys', () => {
  it('migrates with its own migration table, idempotently, and can go down', async () => {
    const schema = `${t.schema}_m`;
    const first = await migrateIdempotencyKeys(t.db, { schema, table: 'api_keys' });
    expect(first.results?.map((r) => [r.migrationName, r.status])).toEqual([
      ['inboxkit_http_0003_idempotency_key', 'Success'],
    ]);
    expect((await migrateIdempotencyKeys(t.db, { schema, table: 'api_keys' })).results).toEqual([]);
    const tables = await sql<{ table_name: string }>`
      SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY 1`.execute(
      t.db,
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual([
      'api_keys',
      'inboxkit_http_migrations',
      'inboxkit_http_migrations_lock',
    ]);
    const migrator = new Migrator({
      db: t.db,
      provider: idempotencyKeyMigrations({ schema, table: 'api_keys' }),
      migrationTableSchema: schema,
      migrationTableName: 'inboxkit_http_migrations',
      migrationLockTableName: 'inboxkit_http_migrations_lock',
    });
    expect((await migrator.migrateDown()).error).toBeUndefined();
    const after = await sql<{ n: string }>`
      SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = ${schema} AND table_name = 'api_keys'`.execute(
      t.db,
    );
    expect(Number(after.rows[0]?.n)).toBe(0);
    await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(t.db);
  });
});
