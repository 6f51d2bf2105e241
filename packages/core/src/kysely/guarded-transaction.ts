// A Kysely transaction that holds its connection safely across slow work: the outbox relay keeps its claim
// transaction open while a broker confirms. It is the Kysely seam's transaction (kysely-seam.ts): a backend that
// dies meanwhile (a Postgres restart, pg_terminate_backend) rejects it instead of ending the process.

import type { Kysely, Transaction } from 'kysely';
import type { SqlSeam } from '../postgres/sql-seam.js';
import { kyselySeam } from './kysely-seam.js';

const seams = new WeakMap<object, SqlSeam<unknown>>();

/**
 * Runs `fn` in a transaction on one of `db`'s connections, like `db.transaction().execute(fn)`, with the
 * connection guarded while it is held: if its backend dies, `fn`'s queries and the commit fail and the promise
 * rejects with the driver's error (the broken client is discarded by the pool) — the process does not crash.
 * Commits when `fn` resolves (rejecting when Postgres had to roll back instead), rolls back when it rejects.
 * Nested transactions are refused on `trx`. On drivers other than node-postgres it is a plain transaction.
 *
 * @example
 * await guardedTransaction(db, async (trx) => {
 *   const rows = await claimRows(trx);
 *   await broker.publish(rows); // may take seconds: a Postgres restart meanwhile rejects here, nothing crashes
 *   await markDispatched(trx, rows);
 * });
 */
export async function guardedTransaction<DB, T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  let seam = seams.get(db) as SqlSeam<Transaction<DB>> | undefined;
  if (seam === undefined) seams.set(db, (seam = kyselySeam(db)));
  return seam.transaction(async (t) => ({ end: 'commit', value: await fn(t.tx) }));
}
