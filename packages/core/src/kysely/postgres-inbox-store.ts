// `PostgresInboxStore`: the store (../postgres/postgres-inbox-store.ts, which takes a seam and knows no SQL
// library) with the Kysely seam built from the application's `{ db }`. The seam is chosen here, beside the Kysely
// seam, so that the store never imports it (docs/core.md, "Seams").

import type { Kysely, Transaction } from 'kysely';
import { StoreUnavailableError } from '../errors.js';
import {
  SeamInboxStore,
  type InboxStoreOptions,
  type SeamInboxStoreOptions,
} from '../postgres/postgres-inbox-store.js';
import type { SqlSeam } from '../postgres/sql-seam.js';
import { kyselySeam, type KyselySeamOptions } from './kysely-seam.js';

/** Options of `PostgresInboxStore` over the application's Kysely instance. */
export interface PostgresInboxStoreOptions<DB> extends InboxStoreOptions, KyselySeamOptions {
  /** The application's Kysely instance (PostgresDialect over a pg Pool, or a PGlite dialect). Never destroyed here. */
  readonly db: Kysely<DB>;
}

/**
 * The Postgres inbox. Tables and functions come from `migrateInbox(db)` / `inboxMigrations()` or the SQL in
 * `migrations/` (default `inboxkit.inbox`, `inboxkit.inbox_details` and `inboxkit.inbox_replays`). Over Kysely
 * (`{ db }`), handlers get a `Transaction<DB>` that commits with the inbox row; over another seam (`{ seam }`),
 * that seam's transaction. Throws a `StoreUnavailableError` with neither.
 *
 * @example
 * const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString }) }) });
 * await migrateInbox(db);
 * const store = new PostgresInboxStore({ db });
 */
export class PostgresInboxStore<DB = unknown, Tx = Transaction<DB>> extends SeamInboxStore<Tx> {
  constructor(options: PostgresInboxStoreOptions<DB> | SeamInboxStoreOptions<Tx>) {
    super(withSeam(options));
  }
}

/** The options with their seam: the one given, or the Kysely seam over `db`. */
function withSeam<DB, Tx>(
  options: PostgresInboxStoreOptions<DB> | SeamInboxStoreOptions<Tx>,
): SeamInboxStoreOptions<Tx> {
  const given = options as Partial<PostgresInboxStoreOptions<DB> & SeamInboxStoreOptions<Tx>> | undefined;
  if (given?.seam === undefined && typeof given?.db?.getExecutor !== 'function') {
    throw new StoreUnavailableError(
      'PostgresInboxStore needs { db }: a Kysely instance over node-postgres or PGlite (or { seam })',
    );
  }
  if (given.seam !== undefined) return given as SeamInboxStoreOptions<Tx>;
  return { ...given, seam: kyselySeam(given.db!, given) as unknown as SqlSeam<Tx> };
}
