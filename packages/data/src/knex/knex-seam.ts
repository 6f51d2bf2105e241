// Knex: the handler's `context.tx` is a `Knex.Transaction` that Knex itself opened (BEGIN) and ends (COMMIT or
// ROLLBACK), on a connection the seam took from Knex's pool and runs the store's statements on directly.

import { ConfigurationError, TransactionControlError } from '@inboxkit/core';
import { PostgresInboxStore, type InboxStoreOptions, type SqlSeam } from '@inboxkit/core/postgres';
import type { Knex } from 'knex';
import { librarySeam } from '../library-seam.js';
import { abortedOn, endedOn, queryOn, watchConnection, type PgConnection } from '../pg-connection.js';
import { abortedTransactionError } from '../postgres-error.js';

/** The slice of Knex' client the seam uses: its pool of node-postgres connections. */
interface KnexClient {
  readonly dialect?: string;
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): Promise<unknown>;
}

/** Options of `knexSeam`. */
export interface KnexSeamOptions {
  /**
   * `auto`: the store's first statement of a transaction (the claim) goes in the same round trip as Knex' BEGIN
   * (one simple-protocol query, its parameters written as SQL literals). `off`: Knex' BEGIN, then the claim with
   * bind parameters. Default is `auto`.
   */
  readonly pipelining?: 'auto' | 'off';
}

/**
 * The seam over `knex` (a Knex instance with the `pg` client): each transaction is `knex.transaction()` on a
 * connection of Knex' own pool, and handlers get its `Knex.Transaction` as `context.tx`. Throws a
 * `ConfigurationError` for a Knex transaction (every delivery would share it) and for a client other than
 * Postgres.
 *
 * @example
 * const knex = Knex({ client: 'pg', connection: process.env.DATABASE_URL });
 * const store = new PostgresInboxStore({ seam: knexSeam(knex) });
 * idempotentConsumer({ name: 'orders', store, handler: async (m, { tx }) => { await tx('orders').insert({ id: m.id }); } });
 */
export function knexSeam(knex: Knex, options: KnexSeamOptions = {}): SqlSeam<Knex.Transaction> {
  const client = checkKnex(knex);
  const pipelining = options.pipelining !== 'off';
  const withConnection = async <T>(fn: (connection: PgConnection) => Promise<T>): Promise<T> => {
    const connection = await client.acquireConnection();
    try {
      return await fn(connection);
    } finally {
      await client.releaseConnection(connection);
    }
  };
  return librarySeam<Knex.Transaction>({
    query: (statement) => withConnection((connection) => queryOn(connection, statement)),
    transaction: (fn, first, watch) =>
      withConnection(async (connection) => {
        const watched = watchConnection(connection, pipelining ? first : undefined, watch);
        try {
          const value = await knex.transaction(async (trx) => {
            // trx.commit() and trx.rollback() would end Knex' transaction (and settle it) under the store:
            // refused while the handler runs; Knex' own commit at the end calls them once they are back.
            const own: unknown = { commit: Reflect.get(trx, 'commit'), rollback: Reflect.get(trx, 'rollback') };
            const refuse = (call: string) => () => {
              const refused = Promise.reject(watch.record(new TransactionControlError(call, 'none')));
              refused.catch(() => undefined);
              return refused;
            };
            Object.assign(trx, { commit: refuse('trx.commit()'), rollback: refuse('trx.rollback()') });
            watched.handling = true;
            try {
              return await fn({
                tx: trx,
                query: (statement) => watched.query(statement),
                aborted: () => abortedOn(connection),
                ended: () => (trx.isCompleted() ? 'Knex ended the transaction' : endedOn(connection)),
                first: watched.firstRows(),
              });
            } finally {
              watched.handling = false;
              Object.assign(trx, own);
            }
          }, { connection });
          if (watched.rolledBack) throw abortedTransactionError();
          return value;
        } finally {
          watched.stop();
        }
      }),
  });
}

/** Options of `knexInboxStore`. */
export interface KnexInboxStoreOptions extends InboxStoreOptions, KnexSeamOptions {
  /** The application's Knex instance (client `pg`). Never destroyed here. */
  readonly knex: Knex;
}

/**
 * The Postgres inbox over Knex: `new PostgresInboxStore({ seam: knexSeam(knex) })` with the table options.
 *
 * @example
 * const store = knexInboxStore({ knex, schema: 'inboxkit' });
 */
export function knexInboxStore(
  options: KnexInboxStoreOptions,
): PostgresInboxStore<unknown, Knex.Transaction> {
  return new PostgresInboxStore<unknown, Knex.Transaction>({
    ...options,
    seam: knexSeam(options.knex, options),
  });
}

function checkKnex(knex: Knex): KnexClient {
  if (typeof knex !== 'function' || typeof knex.transaction !== 'function') {
    throw new ConfigurationError("knexSeam needs a Knex instance: Knex({ client: 'pg', connection })");
  }
  if (knex.isTransaction === true) {
    throw new ConfigurationError(
      'knexSeam was given a Knex transaction: every delivery would run in that one transaction. Pass the Knex instance itself; the store opens a transaction per delivery and hands it to the handler as context.tx',
    );
  }
  const client = knex.client as unknown as KnexClient;
  if (client.dialect !== 'postgresql') {
    throw new ConfigurationError(
      `knexSeam needs Knex' Postgres client (client: 'pg'), got ${JSON.stringify(client.dialect)}: the inbox lives in Postgres`,
    );
  }
  return client;
}
