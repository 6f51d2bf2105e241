// A fresh Postgres schema per test file: the inbox tables (core's migration) and an `effects` table with no
// unique constraint, so an effect applied twice shows up as two rows.
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

import { databaseUrl } from './kafka-services.js';

/** One test database schema and its inbox store. */
export interface TestDatabase {
  readonly schema: string;
  readonly db: Kysely<unknown>;
  readonly store: PostgresInboxStore<unknown>;
  /** Applies the effect of `id` inside the handler's transaction. */
  applyEffect(tx: Transaction<unknown>, id: string): Promise<void>;
  /** How many times each id's effect was applied. */
  effectCounts(): Promise<Map<string, number>>;
  dispose(): Promise<void>;
}

/** Creates schema `schema` with the inbox and effects tables. */
export async function testDatabase(schema: string): Promise<TestDatabase> {
  const pool = new pg.Pool({ connectionString: databaseUrl(), max: 8 });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
  await migrateInbox(db, { schema });
  await sql
    .raw(`CREATE TABLE "${schema}".effects (id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
    .execute(db);
  const effects = sql.raw(`"${schema}".effects`);
  return {
    schema,
    db,
    store: new PostgresInboxStore<unknown>({ db, schema }),
    async applyEffect(tx, id) {
      await sql`INSERT INTO ${effects} (id) VALUES (${id})`.execute(tx);
    },
    async effectCounts() {
      const { rows } = await sql<{
        id: string;
        n: number;
      }>`SELECT id, count(*)::int AS n FROM ${effects} GROUP BY id`.execute(db);
      return new Map(rows.map((r) => [r.id, r.n]));
    },
    async dispose() {
      await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
      await db.destroy();
    },
  };
}

/** Schema names Postgres accepts, from a test-unique name. */
export function schemaName(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .slice(0, 50);
}
