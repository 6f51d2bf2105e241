// Real Postgres for the NATS tests: the services' server, one fresh schema per test file holding the inbox
// tables and an `effects` table without a unique key, so an effect applied twice is counted, not prevented.

import type { Generated, Kysely, Transaction } from 'kysely';

import { openInboxTestDatabase } from '../../../../test/support/inbox-database.js';

/** The table handlers write in these tests. */
export interface TestDB {
  effects: { seq: Generated<string>; consumer: string; message_id: string };
}

export type TestTx = Transaction<TestDB>;

/** A database handle on a schema of its own. */
export interface TestDatabase {
  readonly db: Kysely<TestDB>;
  readonly url: string;
  readonly schema: string;
  /** Drops the schema and ends the pool. */
  close(): Promise<void>;
}

/** Creates the schema with the inbox and an effects table (test/support/inbox-database.ts). */
export async function openTestDatabase(label: string, poolSize = 12): Promise<TestDatabase> {
  const t = await openInboxTestDatabase<TestDB>(`nats_${label}`, { poolSize });
  return { db: t.db, url: t.url, schema: t.schema, close: () => t.close() };
}

/** Inserts one effect row through the handler's transaction. */
export async function insertEffect(
  tx: Kysely<TestDB>,
  schema: string,
  consumer: string,
  messageId: string,
): Promise<void> {
  await tx.withSchema(schema).insertInto('effects').values({ consumer, message_id: messageId }).execute();
}

/** How many times each message's effect was applied by `consumer`. */
export async function effectCounts(
  db: Kysely<TestDB>,
  schema: string,
  consumer: string,
): Promise<Map<string, number>> {
  const rows = await db
    .withSchema(schema)
    .selectFrom('effects')
    .select(['message_id', db.fn.countAll<string>().as('count')])
    .where('consumer', '=', consumer)
    .groupBy('message_id')
    .execute();
  return new Map(rows.map((r) => [r.message_id, Number(r.count)]));
}
