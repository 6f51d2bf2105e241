// A Kysely transaction that holds its connection safely across slow work: the outbox relay keeps its claim
// transaction open while a broker confirms. node-postgres reports a backend that dies meanwhile (a Postgres
// restart, pg_terminate_backend) as an 'error' event on the checked-out client, which nobody listens to and
// which would end the process; under the guard of held-connection.ts the transaction rejects instead.

import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import { HandlerTransaction } from './handler-transaction.js';
import { ConnectionGuard } from './held-connection.js';

/**
 * Runs `fn` in a transaction on one of `db`'s connections, like `db.transaction().execute(fn)`, with the
 * connection guarded while it is held: if its backend dies, `fn`'s queries and the commit fail and the promise
 * rejects with the driver's error (the broken client is discarded by the pool) — the process does not crash.
 * Commits when `fn` resolves, rolls back when it rejects. Nested transactions are refused on `trx`. On drivers
 * other than node-postgres it is a plain transaction.
 *
 * @example
 * await guardedTransaction(db, async (trx) => {
 *   const rows = await claimRows(trx);
 *   await broker.publish(rows); // may take seconds: a Postgres restart meanwhile rejects here, nothing crashes
 *   await markDispatched(trx, rows);
 * });
 */
export async function guardedTransaction<DB, T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  const executor = db.getExecutor();
  return executor.provideConnection(async (connection) => {
    const guard = new ConnectionGuard();
    const holding = guard.hold(connection);
    if (holding !== undefined) await holding;
    const transaction = new HandlerTransaction<DB>(executor, () => Promise.resolve(connection));
    try {
      await connection.executeQuery(CompiledQuery.raw('BEGIN'));
      let result: T;
      try {
        result = await fn(transaction.tx);
      } catch (error) {
        await connection.executeQuery(CompiledQuery.raw('ROLLBACK')).catch(() => undefined);
        throw error;
      }
      await connection.executeQuery(CompiledQuery.raw('COMMIT'));
      return result;
    } finally {
      transaction.close();
      guard.release();
    }
  });
}
