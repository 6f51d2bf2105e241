// The CLI's handle on core's Postgres inbox store, built from the connection settings (schema, table).

import { PostgresInboxStore, type InboxLayout } from '@inboxkit/core/postgres';
import { sql, type Kysely } from 'kysely';

/** Where the inbox table is. */
export interface InboxTableName {
  /** Default is `inboxkit` (core's default). */
  readonly schema?: string | undefined;
  /** Default is `inbox`. */
  readonly table?: string | undefined;
}

/** Core's store over `db` for the named table (never destroys `db`). */
export function inboxStore(db: Kysely<unknown>, name: InboxTableName, layout?: InboxLayout): PostgresInboxStore {
  return new PostgresInboxStore({
    db,
    ...(name.schema !== undefined ? { schema: name.schema } : {}),
    ...(name.table !== undefined ? { table: name.table } : {}),
    ...(layout !== undefined ? { layout } : {}),
  });
}

/**
 * Core's store over `db` for the named table, in the layout the table has in the database, so every read
 * joins a row's details on its whole key (the partitioned layout's `day` too).
 */
export async function openInboxStore(db: Kysely<unknown>, name: InboxTableName): Promise<PostgresInboxStore> {
  return inboxStore(db, name, await inboxLayoutOf(db, name));
}

/** The layout the inbox table has in the database: `daily-partitions` when it is a partitioned table. */
export async function inboxLayoutOf(db: Kysely<unknown>, name: InboxTableName): Promise<InboxLayout> {
  const table = `"${name.schema ?? 'inboxkit'}"."${name.table ?? 'inbox'}"`;
  const { rows } = await sql<{ kind: string | null }>`SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass(${table})) AS kind`.execute(db);
  return rows[0]?.kind === 'p' ? 'daily-partitions' : 'table';
}
