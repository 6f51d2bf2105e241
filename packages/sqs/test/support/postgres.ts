// Real Postgres for the SQS tests: the services' server, one fresh schema per test file holding the inbox
// tables and an `effects` table without a unique key, so an effect applied twice is counted, not prevented.

import { randomBytes } from 'node:crypto';

import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Generated, Transaction } from 'kysely';
import pg from 'pg';

import { databaseUrl } from './sqs-test-client.js';

/** The tables handlers write in these tests. */
export interface TestDB {
  effects: {
    seq: Generated<string>;
    consumer: string;
    message_id: string;
    group_key: string | null;
    n: number | null;
  };
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

/** Connects (failing with instructions when Postgres is down) and creates the schema, inbox and effects table. */
export async function openTestDatabase(label: string, poolSize = 12): Promise<TestDatabase> {
  const url = databaseUrl();
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  pool.on('error', () => undefined);
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end();
    throw new Error(
      `Postgres is not reachable at ${url} (${(error as Error).message}): start it with \`npm run services:up\``,
      {
        cause: error,
      },
    );
  }
  const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
  const schema = `sqs_${label.replace(/\W/g, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  await migrateInbox(db, { schema });
  await sql
    .raw(
      `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL, group_key text, n int)`,
    )
    .execute(db);
  return {
    db,
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
export async function insertEffect(
  tx: Kysely<TestDB>,
  schema: string,
  effect: { consumer: string; messageId: string; groupKey?: string; n?: number },
): Promise<void> {
  await tx
    .withSchema(schema)
    .insertInto('effects')
    .values({
      consumer: effect.consumer,
      message_id: effect.messageId,
      group_key: effect.groupKey ?? null,
      n: effect.n ?? null,
    })
    .execute();
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

/** The effects of `consumer` in the order they committed. */
export async function effectsInOrder(
  db: Kysely<TestDB>,
  schema: string,
  consumer: string,
): Promise<{ message_id: string; group_key: string | null; n: number | null }[]> {
  return db
    .withSchema(schema)
    .selectFrom('effects')
    .select(['message_id', 'group_key', 'n'])
    .where('consumer', '=', consumer)
    .orderBy('seq')
    .execute();
}
