// PGlite (Postgres compiled to WASM, in process) for fast tests of the Postgres store's SQL.

import { PGlite } from '@electric-sql/pglite';
import { Kysely, sql } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import { migrateInbox } from '../../src/postgres/index.js';
import type { TestDB } from './postgres.js';

/** A fresh in-process database with the inbox tables and an `effects` table. */
export async function openPglite(schema = 'inboxkit'): Promise<{ db: Kysely<TestDB>; schema: string; close(): Promise<void> }> {
  const db = new Kysely<TestDB>({ dialect: new PGliteDialect(new PGlite()) });
  await migrateInbox(db, { schema });
  await sql.raw(`CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`).execute(db);
  return { db, schema, close: () => db.destroy() };
}
