// The SqlSeam over a data layer that opens and ends its transactions itself (Knex, postgres.js, TypeORM, Prisma,
// Drizzle on postgres.js): the store's work runs inside the library's own transaction callback, so the handler's
// `context.tx` is the library's transaction object, and the library sends BEGIN, COMMIT and ROLLBACK. An adapter
// says only how to run a statement, how to open a transaction, and how to tell an aborted one (`LibraryDriver`, below).

import { findTransactionControl, TransactionControlError } from '@inboxkit/core';
import {
  registerTransactionQuery,
  TransactionControlWatch,
  type SeamTransaction,
  type SqlRow,
  type SqlSeam,
  type SqlStatement,
  type TransactionOptions,
  type TransactionWork,
} from '@inboxkit/core/postgres';
import { abortedTransactionError, postgresError } from './postgres-error.js';

/** One transaction of the data layer, as the seam drives it. */
export interface LibrarySession<Tx> {
  /** The library's transaction object, handed to handlers as `context.tx`. */
  readonly tx: Tx;
  /** Runs one statement in this transaction. */
  query(statement: SqlStatement): Promise<SqlRow[]>;
  /**
   * True when a failed statement left the transaction aborted, so that the library's COMMIT would quietly roll
   * it back. An adapter that can read the connection's state does (no round trip); else it asks Postgres.
   */
  aborted(): Promise<boolean>;
  /**
   * The rows of the transaction's first statement (`LibraryDriver.transaction`'s `first`), when the adapter sent
   * it with the library's BEGIN; absent otherwise, and the seam then runs it through `query`.
   */
  readonly first?: Promise<SqlRow[]>;
  /**
   * What ended the transaction under the library, found after the handler (the library's own state, the
   * connection's transaction status), or `undefined` while it is still the one the library opened. Read with
   * no round trip; absent where the adapter cannot tell (its `watch` then refuses what it sees).
   */
  ended?(): string | undefined;
}

/** What an adapter supplies for one data layer. */
export interface LibraryDriver<Tx> {
  /** Runs one statement outside any transaction, on the library's pool. */
  query(statement: SqlStatement): Promise<SqlRow[]>;
  /**
   * Runs `fn` in one of the library's transactions: committed when `fn` resolves, rolled back when it rejects
   * (and rejecting with `fn`'s error), as every library's transaction callback does. An adapter may send
   * `first` with the library's BEGIN (one round trip) and hand its rows as `session.first`; when that statement
   * fails, the transaction rejects with its error, `fn` never called. Every statement the handler sends through
   * `session.tx` (not `session.query`'s) goes to `watch.refuse` first and is rejected, unsent, with the error it
   * returns — COMMIT, ROLLBACK … through the handler's transaction — as are the library's own commit and
   * rollback calls on `session.tx` while `fn` runs.
   */
  transaction<T>(
    fn: (session: LibrarySession<Tx>) => Promise<T>,
    first: SqlStatement | undefined,
    watch: TransactionControlWatch,
  ): Promise<T>;
}

/** Thrown inside the library's callback to end its transaction with a ROLLBACK; never leaves the seam. */
class EndWithRollback {
  constructor(readonly value: unknown) {}
}

/** Thrown inside the library's callback when the transaction was found aborted (its COMMIT would roll back). */
class FoundAborted {}

/**
 * The seam over `driver`.
 *
 * @example
 * const seam = librarySeam<Knex.Transaction>({ query: …, transaction: (fn) => knex.transaction((trx) => fn(session(trx))) });
 */
export function librarySeam<Tx>(driver: LibraryDriver<Tx>): SqlSeam<Tx> {
  return {
    async query(statement) {
      try {
        return await driver.query(statement);
      } catch (error) {
        throw postgresError(error);
      }
    },
    async transaction<T>(work: TransactionWork<Tx, T>, options: TransactionOptions = {}): Promise<T> {
      const watch = new TransactionControlWatch();
      try {
        return await driver.transaction(async (session) => {
          const first =
            options.first === undefined
              ? []
              : session.first !== undefined
                ? await session.first
                : await query(session, options.first);
          const run = (statement: SqlStatement): Promise<SqlRow[]> => query(session, statement);
          const transaction: SeamTransaction<Tx> = { tx: session.tx, query: run, transactionControl: () => watch.take() };
          const close = registerTransactionQuery(session.tx, run);
          let end;
          try {
            end = await work(transaction, first);
          } catch (error) {
            throw watch.take() ?? error; // the library rolls back
          } finally {
            close();
          }
          // Refused transaction control the store did not take, or a transaction ended under the library.
          const control = watch.take();
          if (control !== undefined) throw control;
          const ended = session.ended?.();
          if (ended !== undefined) throw new TransactionControlError(ended, 'unknown');
          if (end.end !== 'commit') throw new EndWithRollback(end.value);
          if (await session.aborted()) throw new FoundAborted();
          return end.value;
        }, options.first, watch);
      } catch (error) {
        if (error instanceof EndWithRollback) return error.value as T;
        if (error instanceof FoundAborted) throw abortedTransactionError();
        throw findTransactionControl(error) ?? postgresError(error);
      }
    },
  };
}

async function query<Tx>(session: LibrarySession<Tx>, statement: SqlStatement): Promise<SqlRow[]> {
  try {
    return await session.query(statement);
  } catch (error) {
    throw postgresError(error);
  }
}
