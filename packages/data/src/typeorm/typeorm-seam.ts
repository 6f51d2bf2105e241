// TypeORM: the handler's `context.tx` is the `EntityManager` of a QueryRunner in a transaction TypeORM itself
// started (its `manager.queryRunner` is that QueryRunner), as `dataSource.transaction()` would give it. The
// store's statements run on the QueryRunner's node-postgres client, and the seam watches the COMMIT TypeORM
// sends there: Postgres answers the COMMIT of an aborted transaction with a ROLLBACK, which TypeORM ignores.

import { ConfigurationError } from '@inboxkit/core';
import { PostgresInboxStore, type InboxStoreOptions, type SqlSeam } from '@inboxkit/core/postgres';
import type { DataSource, EntityManager } from 'typeorm';
import { librarySeam } from '../library-seam.js';
import { abortedOn, endedOn, queryOn, watchConnection, type PgConnection } from '../pg-connection.js';
import { abortedTransactionError } from '../postgres-error.js';

/** Options of `typeormSeam`. */
export interface TypeormSeamOptions {
  /**
   * `auto`: the store's first statement of a transaction (the claim) goes in the same round trip as TypeORM's
   * START TRANSACTION (one simple-protocol query, its parameters written as SQL literals), unless the DataSource
   * sets an `isolationLevel` (TypeORM sets it after START TRANSACTION, before any other statement). `off`: START
   * TRANSACTION, then the claim with bind parameters. Default is `auto`.
   */
  readonly pipelining?: 'auto' | 'off';
}

/**
 * The seam over an initialized TypeORM `DataSource` on Postgres: each transaction is a QueryRunner's
 * (`startTransaction`/`commitTransaction`), and handlers get its `EntityManager` as `context.tx`. Throws a
 * `ConfigurationError` for a DataSource that is not initialized or not Postgres, and for an EntityManager
 * (a transaction's would be shared by every delivery).
 *
 * @example
 * const dataSource = await new DataSource({ type: 'postgres', url, entities: [Order] }).initialize();
 * const store = new PostgresInboxStore({ seam: typeormSeam(dataSource) });
 * idempotentConsumer({ name: 'orders', store, handler: async (m, { tx }) => { await tx.insert(Order, { id: m.id }); } });
 */
export function typeormSeam(
  dataSource: DataSource,
  options: TypeormSeamOptions = {},
): SqlSeam<EntityManager> {
  checkDataSource(dataSource);
  const pipelining =
    options.pipelining !== 'off' &&
    (dataSource.options as { isolationLevel?: unknown }).isolationLevel === undefined;
  return librarySeam<EntityManager>({
    query: async (statement) => {
      const runner = dataSource.createQueryRunner('master');
      try {
        return await queryOn((await runner.connect()) as PgConnection, statement);
      } finally {
        await runner.release();
      }
    },
    transaction: async (fn, first, watch) => {
      const runner = dataSource.createQueryRunner('master');
      try {
        const client = (await runner.connect()) as PgConnection;
        const watched = watchConnection(client, pipelining ? first : undefined, watch);
        try {
          await runner.startTransaction();
          let value;
          try {
            // The handler's COMMIT or ROLLBACK (manager.query, or manager.queryRunner.commitTransaction()) is
            // refused, unsent, on the client; TypeORM's own state is then untouched.
            watched.handling = true;
            try {
              value = await fn({
                tx: runner.manager,
                query: (statement) => watched.query(statement),
                aborted: () => abortedOn(client),
                ended: () =>
                  runner.isTransactionActive ? endedOn(client) : 'the QueryRunner ended the transaction',
                first: watched.firstRows(),
              });
            } finally {
              watched.handling = false;
            }
          } catch (error) {
            // A transaction the handler ended is no longer TypeORM's to roll back.
            if (runner.isTransactionActive) await runner.rollbackTransaction();
            else if (endedOn(client) === undefined) await queryOn(client, { sql: 'ROLLBACK', parameters: [] });
            throw error;
          }
          await runner.commitTransaction();
          if (watched.rolledBack) throw abortedTransactionError();
          return value;
        } finally {
          watched.stop();
        }
      } finally {
        await runner.release();
      }
    },
  });
}

/** Options of `typeormInboxStore`. */
export interface TypeormInboxStoreOptions extends InboxStoreOptions, TypeormSeamOptions {
  /** The application's initialized DataSource (type `postgres`). Never destroyed here. */
  readonly dataSource: DataSource;
}

/**
 * The Postgres inbox over TypeORM: `new PostgresInboxStore({ seam: typeormSeam(dataSource) })` with the table
 * options.
 *
 * @example
 * const store = typeormInboxStore({ dataSource, schema: 'inboxkit' });
 */
export function typeormInboxStore(
  options: TypeormInboxStoreOptions,
): PostgresInboxStore<unknown, EntityManager> {
  return new PostgresInboxStore<unknown, EntityManager>({
    ...options,
    seam: typeormSeam(options.dataSource, options),
  });
}

function checkDataSource(dataSource: DataSource): void {
  const candidate = dataSource as Partial<DataSource> | undefined;
  if (typeof candidate?.createQueryRunner !== 'function' || !('isInitialized' in candidate)) {
    throw new ConfigurationError(
      "typeormSeam needs a TypeORM DataSource (an EntityManager, above all a transaction's, would be shared by every delivery): pass the DataSource; the store opens a transaction per delivery and hands its EntityManager to the handler as context.tx",
    );
  }
  if (candidate.options?.type !== 'postgres') {
    throw new ConfigurationError(
      `typeormSeam needs a DataSource of type 'postgres', got ${JSON.stringify(candidate.options?.type)}: the inbox lives in Postgres`,
    );
  }
  if (candidate.isInitialized !== true) {
    throw new ConfigurationError(
      'typeormSeam needs an initialized DataSource: await dataSource.initialize() before building the store',
    );
  }
}
