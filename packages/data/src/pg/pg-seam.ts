// node-postgres: the handler's `context.tx` is the `pg.PoolClient` the store holds, inside BEGIN.

import { ConfigurationError } from '@inboxkit/core';
import { PostgresInboxStore, type InboxStoreOptions, type SqlSeam } from '@inboxkit/core/postgres';
import type pg from 'pg';
import { pgClientSeam, type PgClientSeamOptions, type PgPool } from '../pg-client-seam.js';

/**
 * The seam over a node-postgres `Pool`: each transaction holds one of its clients, and handlers get that
 * `PoolClient` as `context.tx` (its queries run in the inbox's transaction; do not `release()` it, and do not
 * keep it past the handler). Throws a `ConfigurationError` for a single `pg.Client`, which cannot carry
 * concurrent transactions.
 *
 * @example
 * const pool = new pg.Pool({ connectionString });
 * const store = new PostgresInboxStore({ seam: pgSeam(pool) });
 * idempotentConsumer({ name: 'orders', store, handler: async (m, { tx }) => { await tx.query('INSERT …', [m.id]); } });
 */
export function pgSeam(pool: pg.Pool, options: PgClientSeamOptions = {}): SqlSeam<pg.PoolClient> {
  checkPool(pool, 'pgSeam');
  return pgClientSeam(pool, (client) => client, options);
}

/** Options of `pgInboxStore`. */
export interface PgInboxStoreOptions extends InboxStoreOptions, PgClientSeamOptions {
  /** The application's node-postgres pool. Never ended here. */
  readonly pool: pg.Pool;
}

/**
 * The Postgres inbox over a node-postgres pool: `new PostgresInboxStore({ seam: pgSeam(pool) })` with the
 * table options. Handlers get a `pg.PoolClient` as `context.tx`.
 *
 * @example
 * const store = pgInboxStore({ pool, schema: 'inboxkit' });
 */
export function pgInboxStore(options: PgInboxStoreOptions): PostgresInboxStore<unknown, pg.PoolClient> {
  return new PostgresInboxStore<unknown, pg.PoolClient>({ ...options, seam: pgSeam(options.pool, options) });
}

/** Refuses what is not a pool: one connection would run every delivery's transaction into one another. */
export function checkPool(pool: unknown, caller: string): asserts pool is PgPool {
  const candidate = pool as Partial<pg.Pool> | undefined;
  if (typeof candidate?.connect !== 'function' || typeof candidate.query !== 'function') {
    throw new ConfigurationError(`${caller} needs a node-postgres pool (new pg.Pool({ connectionString }))`);
  }
  if (!('totalCount' in candidate) || 'release' in candidate) {
    throw new ConfigurationError(
      `${caller} was given a single pg.Client (or a checked-out PoolClient): concurrent deliveries would share one connection, and one transaction. Pass a pg.Pool instead; the store holds one of its clients per transaction`,
    );
  }
}
