// Drizzle: the handler's `context.tx` is Drizzle's own transaction object, as `db.transaction()` would give it.
// On drizzle-orm/node-postgres the seam holds the pool's client itself (BEGIN sent with the claim, COMMIT's
// tag read) and builds Drizzle's NodePgTransaction over it, exactly as Drizzle does; on drizzle-orm/postgres-js
// it runs inside `db.transaction()`, which is postgres.js' `sql.begin()`.

import { ConfigurationError } from '@inboxkit/core';
import { PostgresInboxStore, type InboxStoreOptions, type SqlSeam } from '@inboxkit/core/postgres';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Sql } from 'postgres';
import { librarySeam } from '../library-seam.js';
import { refusingSql } from '../refuse-control.js';
import { pgClientSeam, type PgClientSeamOptions } from '../pg-client-seam.js';
import { checkPool } from '../pg/pg-seam.js';
import { checkSql, unsafeQuery } from '../postgres-js/postgres-js-seam.js';

/** A Drizzle database on Postgres (`drizzle()` of drizzle-orm/node-postgres or drizzle-orm/postgres-js). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- whatever the application's schema
export type DrizzlePgDatabase = PgDatabase<PgQueryResultHKT, any, any>;

/** The transaction object `db.transaction()` hands its callback: what handlers get as `context.tx`. */
export type DrizzleTransaction<TDb extends DrizzlePgDatabase> = Parameters<
  Parameters<TDb['transaction']>[0]
>[0];

/** Drizzle's session, as the seam reads it (the fields Drizzle's own `transaction()` uses). */
interface Session {
  readonly client: unknown;
  readonly dialect: unknown;
  readonly schema: unknown;
  readonly options: unknown;
}

const ENTITY_KIND = Symbol.for('drizzle:entityKind');

/**
 * The seam over a Drizzle database on Postgres; handlers get Drizzle's transaction as `context.tx` (typed with
 * the application's schema). Throws a `ConfigurationError` for a Drizzle over a single `pg.Client` or over a
 * postgres.js transaction (every delivery would share one connection), for a Drizzle transaction, and for
 * drivers other than node-postgres and postgres.js.
 *
 * @example
 * const db = drizzle({ client: new pg.Pool({ connectionString }), schema });
 * const store = new PostgresInboxStore({ seam: drizzleSeam(db) });
 * idempotentConsumer({ name: 'orders', store, handler: async (m, { tx }) => { await tx.insert(orders).values({ id: m.id }); } });
 */
export function drizzleSeam<TDb extends DrizzlePgDatabase>(
  db: TDb,
  options: PgClientSeamOptions = {},
): SqlSeam<DrizzleTransaction<TDb>> {
  const session = (db as Partial<TDb> | undefined)?._?.session as unknown as Session | undefined;
  const kind = kindOf(session);
  const own = kindOf(db);
  if (own === 'NodePgTransaction' || own === 'PostgresJsTransaction') throw refusedTransaction();
  if (kind === 'NodePgSession') {
    if (typeof (session!.client as { release?: unknown }).release === 'function') throw refusedTransaction();
    const pool = session!.client;
    checkPool(pool, 'drizzleSeam');
    const drizzlePg = import('drizzle-orm/node-postgres');
    return pgClientSeam<DrizzleTransaction<TDb>>(
      pool,
      async (client: pg.PoolClient) => {
        const { NodePgSession, NodePgTransaction } = await drizzlePg;
        type Args = ConstructorParameters<typeof NodePgSession>;
        const held = new NodePgSession(
          client,
          session!.dialect as Args[1],
          session!.schema as Args[2],
          session!.options as Args[3],
        );
        return new NodePgTransaction(
          session!.dialect as Args[1],
          held,
          session!.schema as Args[2],
        ) as DrizzleTransaction<TDb>;
      },
      options,
    );
  }
  if (kind === 'PostgresJsSession') {
    const sql = session!.client as Sql;
    checkSql(sql, 'drizzleSeam');
    return librarySeam<DrizzleTransaction<TDb>>({
      query: (statement) => unsafeQuery(sql, statement),
      transaction: (fn, _first, watch) =>
        db.transaction((tx) => {
          // Drizzle's postgres.js transaction runs on the TransactionSql of sql.begin(), kept in its session;
          // the handler's statements reach it there, past the transaction-control watch.
          const session = (tx as unknown as { session: { client: unknown } }).session;
          const txSql = session.client as Sql;
          session.client = refusingSql(txSql, watch);
          return fn({
            tx: tx as DrizzleTransaction<TDb>,
            query: (statement) => unsafeQuery(txSql, statement),
            aborted: () => Promise.resolve(false),
          });
        }),
    });
  }
  throw new ConfigurationError(
    `drizzleSeam needs a Drizzle database from drizzle-orm/node-postgres (over a pg.Pool) or drizzle-orm/postgres-js, got ${typeof kind === 'string' ? kind : 'something else'}`,
  );
}

/** Drizzle's own name for the class of `value` (`NodePgDatabase`, `NodePgTransaction` …). */
function kindOf(value: unknown): unknown {
  return (value as { constructor?: { [kind: symbol]: unknown } } | undefined)?.constructor?.[ENTITY_KIND];
}

function refusedTransaction(): ConfigurationError {
  return new ConfigurationError(
    'drizzleSeam was given a Drizzle transaction (or a Drizzle over a checked-out client): every delivery would run in that one transaction. Pass the database drizzle() returned, over a pool; the store opens a transaction per delivery and hands it to the handler as context.tx',
  );
}

/** Options of `drizzleInboxStore`. */
export interface DrizzleInboxStoreOptions<TDb extends DrizzlePgDatabase>
  extends InboxStoreOptions, PgClientSeamOptions {
  /** The application's Drizzle database. Its pool is never ended here. */
  readonly db: TDb;
}

/**
 * The Postgres inbox over Drizzle: `new PostgresInboxStore({ seam: drizzleSeam(db) })` with the table options.
 *
 * @example
 * const store = drizzleInboxStore({ db, schema: 'inboxkit' });
 */
export function drizzleInboxStore<TDb extends DrizzlePgDatabase>(
  options: DrizzleInboxStoreOptions<TDb>,
): PostgresInboxStore<unknown, DrizzleTransaction<TDb>> {
  return new PostgresInboxStore<unknown, DrizzleTransaction<TDb>>({
    ...options,
    seam: drizzleSeam(options.db, options),
  });
}
