// The CLI's handle on core's Postgres inbox store, built from the connection settings (schema, table).

import { PostgresInboxStore } from '@inboxkit/core/postgres';
import type { Kysely } from 'kysely';

/** Where the inbox table is. */
export interface InboxTableName {
  /** Default is `inboxkit` (core's default). */
  readonly schema?: string | undefined;
  /** Default is `inbox`. */
  readonly table?: string | undefined;
}

/** Core's store over `db` for the named table (never destroys `db`). */
export function inboxStore(db: Kysely<unknown>, name: InboxTableName): PostgresInboxStore {
  return new PostgresInboxStore({
    db,
    ...(name.schema !== undefined ? { schema: name.schema } : {}),
    ...(name.table !== undefined ? { table: name.table } : {}),
  });
}
