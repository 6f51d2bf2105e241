// Real Postgres for the RabbitMQ transport's end-to-end tests: one fresh schema per test with the inbox
// tables and an `effects` table that has no unique key, so a doubled effect is counted, never prevented.

import { randomBytes } from 'node:crypto';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Generated, Transaction } from 'kysely';
import pg from 'pg';
import { databaseUrl } from './amqp-service.js';

/** The effects table as Kysely sees it. */
export interface EffectsDatabase {
  effects: { seq: Generated<number>; consumer: string; message_id: string };
}

/** A schema of its own with the inbox and effects tables. */
export interface PostgresFixture {
  readonly url: string;
  readonly schema: string;
  readonly pool: pg.Pool;
  readonly db: Kysely<EffectsDatabase>;
  readonly store: PostgresInboxStore<EffectsDatabase>;
  /** How many times each message id's effect was applied. */
  effectCounts(): Promise<Map<string, number>>;
  /** Rows of the inbox by status. */
  inboxStatuses(): Promise<Record<string, number>>;
  dispose(): Promise<void>;
}

/** Creates the schema, migrates the inbox into it and adds the effects table. Fails clearly if Postgres is down. */
export async function postgresFixture(label: string, poolSize = 12): Promise<PostgresFixture> {
  const url = databaseUrl();
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  pool.on('error', () => undefined);
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end();
    throw new Error(`Postgres is not reachable at ${url}: start it with \`npm run services:up\``, {
      cause: error,
    });
  }
  const schema = `rmq_${label.replace(/\W/g, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const db = new Kysely<EffectsDatabase>({ dialect: new PostgresDialect({ pool }) });
  await createSchema(db as Kysely<unknown>, schema);
  const store = new PostgresInboxStore<EffectsDatabase>({ db, schema });
  return {
    url,
    schema,
    pool,
    db,
    store,
    async effectCounts() {
      const { rows } = await pool.query<{ message_id: string; n: string }>(
        `SELECT message_id, count(*) AS n FROM "${schema}".effects GROUP BY message_id`,
      );
      return new Map(rows.map((r) => [r.message_id, Number(r.n)]));
    },
    async inboxStatuses() {
      const { rows } = await pool.query<{ status: string; n: string }>(
        `SELECT status, count(*) AS n FROM "${schema}".inbox GROUP BY status`,
      );
      return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    },
    async dispose() {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await db.destroy();
    },
  };
}

/** The inbox tables plus `effects` in `schema`. */
export async function createSchema(db: Kysely<unknown>, schema: string): Promise<void> {
  await migrateInbox(db, { schema });
  await sql
    .raw(
      `CREATE TABLE IF NOT EXISTS "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`,
    )
    .execute(db);
}

/** A handler that applies the one-row effect through the inbox's transaction. */
export function insertEffect(schema: string, consumer: string) {
  return async (message: { id: string }, context: { tx: Transaction<EffectsDatabase> }): Promise<void> => {
    await context.tx
      .withSchema(schema)
      .insertInto('effects')
      .values({ consumer, message_id: message.id })
      .execute();
  };
}
