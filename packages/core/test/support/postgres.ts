// Real Postgres for core's tests: the server the test run discovered (test/support/services.ts: DATABASE_URL,
// testcontainers, or `npm run services:up`), one fresh schema per test file. A test that needs Postgres and
// cannot reach it fails, saying how to start it.

import { sql, type Generated, type Kysely, type Transaction } from 'kysely';
import pg from 'pg';
import { openInboxTestDatabase } from '../../../../test/support/inbox-database.js';
import { requireService } from '../../../../test/support/services.js';
import type { InboxLayout } from '../../src/postgres/index.js';

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
 * A unique schema with the inbox tables and an `effects` table (no unique key, so double effects are counted,
 * not prevented): test/support/inbox-database.ts, shared with the transports' tests.
 */
export async function openTestDatabase(label: string, poolSize = 10, layout?: InboxLayout): Promise<TestDatabase> {
  const t = await openInboxTestDatabase<TestDB>(`core_${label}`, { poolSize, ...(layout === undefined ? {} : { layout }) });
  return { db: t.db, pool: t.pool, url: t.url, schema: t.schema, close: () => t.close() };
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

/** A pool whose clients record every statement they send (round trips are what some tests assert). */
export function recordingPool(url: string, applicationName: string, max = 4): { pool: pg.Pool; sent: string[] } {
  const sent: string[] = [];
  class RecordingClient extends pg.Client {
    override query(...args: unknown[]): never {
      const first = args[0] as { text?: string; toString(): string } | string;
      sent.push(typeof first === 'string' ? first : (first.text ?? first.toString()));
      return (super.query as (...a: unknown[]) => never)(...args);
    }
  }
  const pool = new pg.Pool({ connectionString: url, max, Client: RecordingClient, application_name: applicationName });
  return { pool, sent };
}
