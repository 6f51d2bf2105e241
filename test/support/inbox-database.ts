// A fresh schema with the inbox tables and an `effects` table, for any package's tests on the real Postgres.
// The effects table has no unique key on purpose: an effect applied twice is counted, never prevented.

import { migrateInbox, type InboxLayout } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import { createTestSchema, requireService } from './services.js';

/** A schema of its own holding the inbox and effects tables, with a Kysely over its pool. */
export interface InboxTestDatabase<DB> {
  readonly url: string;
  readonly schema: string;
  readonly pool: pg.Pool;
  readonly db: Kysely<DB>;
  /** Drops the schema (cascade) and ends the pool. */
  close(): Promise<void>;
}

export interface InboxTestDatabaseOptions {
  /** Connections in the pool. Default is 10. */
  readonly poolSize?: number;
  /** More columns of `effects` after `seq, consumer, message_id`, as SQL (e.g. `group_key text, n int`). */
  readonly extraEffectColumns?: string;
  /** The inbox's layout. Default is `table`. */
  readonly layout?: InboxLayout;
}

/**
 * Creates a unique schema (named after `prefix`), migrates the inbox into it and adds
 * `effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL, …)`. Fails, saying how
 * to start it, when Postgres is not reachable. The pool ignores errors of idle clients (tests restart Postgres).
 */
export async function openInboxTestDatabase<DB>(
  prefix: string,
  options: InboxTestDatabaseOptions = {},
): Promise<InboxTestDatabase<DB>> {
  const { url } = requireService('postgres');
  let created;
  try {
    created = await createTestSchema(prefix, { max: options.poolSize ?? 10 });
  } catch (error) {
    throw new Error(
      `Postgres is not reachable at ${url} (${(error as Error).message}): start it with \`npm run services:up\``,
      {
        cause: error,
      },
    );
  }
  const { schema, pool, cleanup } = created;
  pool.on('error', () => undefined);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  try {
    await migrateInbox(db, { schema, ...(options.layout === undefined ? {} : { layout: options.layout }) });
    const extra = options.extraEffectColumns ? `, ${options.extraEffectColumns}` : '';
    await sql
      .raw(
        `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL${extra})`,
      )
      .execute(db);
  } catch (error) {
    await cleanup().catch(() => undefined);
    throw error;
  }
  return { url, schema, pool, db, close: cleanup };
}
