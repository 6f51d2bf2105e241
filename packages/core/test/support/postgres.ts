// Real Postgres for core's tests: the server the test run discovered (test/support/services.ts: DATABASE_URL,
// testcontainers, or `npm run services:up`), one fresh schema per test file. A test that needs Postgres and
// cannot reach it fails, saying how to start it.

import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, sql, type Generated, type Transaction } from 'kysely';
import pg from 'pg';
import { requireService } from '../../../../test/support/services.js';
import { migrateInbox } from '../../src/postgres/index.js';

/** The tables tests write through handlers: effects without a unique key, so a double effect is counted. */
export interface TestDB {
  effects: { seq: Generated<string>; consumer: string; message_id: string };
}

/** The handler transaction of tests on Postgres. */
export type TestTx = Transaction<TestDB>;

/** The connection string of the test run's Postgres (found by test/support/global-setup.ts). */
export function databaseUrl(): string {
  return requireService('postgres').url;
}

/** A database handle on a schema of its own. */
export interface TestDatabase {
  readonly db: Kysely<TestDB>;
  readonly pool: pg.Pool;
  readonly url: string;
  /** The schema holding this file's inbox tables and effects table. */
  readonly schema: string;
  /** Drops the schema and ends the pool. */
  close(): Promise<void>;
}

/**
 * Connects (failing with instructions when Postgres is down), creates a unique schema with the inbox tables
 * and an `effects` table (no unique key, so double effects are counted, not prevented).
 */
export async function openTestDatabase(label: string, poolSize = 10): Promise<TestDatabase> {
  const url = databaseUrl();
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end();
    throw new Error(`Postgres is not reachable at ${url} (${(error as Error).message}): start it with \`npm run services:up\``, {
      cause: error,
    });
  }
  const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
  const schema = `core_${label.replace(/\W/g, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  await migrateInbox(db, { schema });
  await sql.raw(`CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`).execute(db);
  return {
    db,
    pool,
    url,
    schema,
    async close() {
      try {
        await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
      } finally {
        await db.destroy();
      }
    },
  };
}

/** Inserts one effect row through the handler's transaction. */
export async function insertEffect(tx: Kysely<TestDB>, schema: string, consumer: string, messageId: string): Promise<void> {
  await tx.withSchema(schema).insertInto('effects').values({ consumer, message_id: messageId }).execute();
}

/** Counts effect rows. */
export async function countEffects(db: Kysely<TestDB>, schema: string, consumer: string, messageId?: string): Promise<number> {
  let q = db.withSchema(schema).selectFrom('effects').select(sql<number>`count(*)::int`.as('n')).where('consumer', '=', consumer);
  if (messageId !== undefined) q = q.where('message_id', '=', messageId);
  return (await q.executeTakeFirstOrThrow()).n;
}
