// The SqlSeam of a library whose transactions are callbacks (Prisma's `$transaction(async (tx) => …)`, Knex's,
// TypeORM's, postgres.js' `sql.begin`), as docs/core.md ("Implementing a seam") shows it; the store conformance
// suite runs over it with a small callback library on node-postgres, so the example is proven, not just read.

import type pg from 'pg';
import type { SqlRow, SqlSeam, SqlStatement, TransactionOptions, TransactionWork } from '../../src/postgres/index.js';

/** What the seam needs of such a library. */
export interface CallbackLibrary<Tx> {
  /** One statement outside any transaction. Rejects with an error whose `code` is the SQLSTATE. */
  query(sql: string, parameters: readonly unknown[]): Promise<SqlRow[]>;
  /** One statement in the transaction `tx`. */
  queryIn(tx: Tx, sql: string, parameters: readonly unknown[]): Promise<SqlRow[]>;
  /** Runs `fn` in a transaction: commits when it resolves, rolls back when it throws (and rethrows). */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
}

/** Thrown out of the callback to end the transaction with a ROLLBACK, carrying the store's value. */
class Rollback {
  constructor(readonly value: unknown) {}
}

export function callbackSeam<Tx>(library: CallbackLibrary<Tx>): SqlSeam<Tx> {
  return {
    query: (statement) => library.query(statement.sql, statement.parameters),
    async transaction<T>(work: TransactionWork<Tx, T>, options: TransactionOptions = {}): Promise<T> {
      try {
        return await library.transaction(async (tx) => {
          const query = (statement: SqlStatement): Promise<SqlRow[]> => library.queryIn(tx, statement.sql, statement.parameters);
          const first = options.first === undefined ? [] : await query(options.first);
          const { end, value } = await work({ tx, query }, first);
          if (end !== 'commit') throw new Rollback(value); // 'release' (nothing written) ends the same way
          // A statement that failed inside, caught by the handler, left the transaction aborted: this fails with
          // 25P02 and the library rolls back, where COMMIT would have rolled back without a word.
          await query({ sql: 'SELECT 1', parameters: [] });
          return value;
        });
      } catch (error) {
        if (error instanceof Rollback) return error.value as T;
        throw error;
      }
    },
  };
}

/** A callback library over a node-postgres pool, handing handlers the pool's client as their transaction. */
export function pgCallbackLibrary(pool: pg.Pool): CallbackLibrary<pg.PoolClient> {
  return {
    query: async (sql, parameters) => (await pool.query(sql, parameters as unknown[])).rows as SqlRow[],
    queryIn: async (client, sql, parameters) => (await client.query(sql, parameters as unknown[])).rows as SqlRow[],
    async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      let lost: unknown;
      const onError = (error: unknown): void => void (lost ??= error); // a backend that dies while held
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        try {
          const value = await fn(client);
          await client.query('COMMIT');
          return value;
        } catch (error) {
          await client.query('ROLLBACK').catch((e: unknown) => void (lost ??= e));
          throw error;
        }
      } catch (error) {
        // A Postgres error leaves the client usable; anything else (a lost connection) does not.
        if (typeof (error as { code?: unknown } | null)?.code !== 'string') lost ??= error;
        throw error;
      } finally {
        client.off('error', onError);
        client.release(lost === undefined ? undefined : true); // a broken client is discarded, not pooled
      }
    },
  };
}
