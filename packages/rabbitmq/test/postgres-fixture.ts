// Real Postgres for the RabbitMQ transport's end-to-end tests: one fresh schema per test with the inbox
// tables and an `effects` table that has no unique key, so a doubled effect is counted, never prevented.

import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { sql, type Generated, type Kysely, type Transaction } from 'kysely';
import type pg from 'pg';
import { openInboxTestDatabase } from '../../../test/support/inbox-database.js';

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
  const t = await openInboxTestDatabase<EffectsDatabase>(`rmq_${label}`, { poolSize });
  const { url, schema, pool, db } = t;
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
    dispose: () => t.close(),
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
