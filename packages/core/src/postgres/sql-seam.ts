// The one seam between the Postgres inbox and the application's SQL library. PostgresInboxStore sends every
// statement through it and knows nothing of the driver: an implementation opens transactions the library's own
// way (Kysely's here; node-postgres, Drizzle, Prisma, TypeORM, Knex or postgres.js the same way) and hands the
// library's transaction object to handlers as `context.tx`. What an implementation can do faster (BEGIN sent
// with the first statement, a statement handler's delivery in one round trip) it does behind this seam, and
// nothing here requires it.

import type { TransactionControlError } from '../errors.js';

/** One statement: SQL text with `$1 … $n` placeholders (each cast to its type), and its parameters in order. */
export interface SqlStatement {
  readonly sql: string;
  /** Strings, numbers, booleans, `Date`s, `null`, or arrays of these. */
  readonly parameters: readonly unknown[];
}

/** The rows of one statement, by column name. */
export type SqlRow = Readonly<Record<string, unknown>>;

/** A transaction the seam opened: the library's own transaction object, and a way to run the store's SQL in it. */
export interface SeamTransaction<Tx> {
  /** The application library's transaction object (Kysely's `Transaction<DB>` …), handed to handlers. */
  readonly tx: Tx;
  /** Runs a statement in this transaction. */
  query(statement: SqlStatement): Promise<SqlRow[]>;
  /**
   * The transaction control (COMMIT, ROLLBACK …) the handler attempted through `tx` since the last call, once:
   * refused by the seam before it was sent, so the transaction is intact and the store fails only that message.
   * Absent on a seam that cannot see the handler's statements (then only the end of the transaction tells).
   */
  transactionControl?(): TransactionControlError | undefined;
}

/**
 * How the store ends a transaction: `commit`, `rollback`, or `release` — nothing was written (a duplicate's
 * claim), so an implementation may end it without waiting for Postgres' answer.
 */
export type TransactionEnd = 'commit' | 'rollback' | 'release';

/** The store's work in a transaction: its result, and how the transaction ends. */
export type TransactionWork<Tx, T> = (
  transaction: SeamTransaction<Tx>,
  /** The rows of `TransactionOptions.first`; empty without it. */
  first: SqlRow[],
) => Promise<{ readonly end: TransactionEnd; readonly value: T }>;

/** Options of `SqlSeam.transaction`. */
export interface TransactionOptions {
  /** Runs first in the transaction; an implementation may send it in the same round trip as BEGIN. */
  readonly first?: SqlStatement;
  /**
   * Open the transaction (and take a connection) only when `tx` or `query` is first used, so that work that
   * calls other services first holds no connection meanwhile. An implementation may open it at once.
   */
  readonly lazy?: boolean;
}

/**
 * A statement handler's delivery, or batch, in one round trip (see `statementHandler`): an optional capability of
 * a seam. `run` sends `claim` (rows of `message_id` and a text `answer`) and, for each statement whose owner's
 * answer starts with `c` (claimed), that statement, committing them together in one autocommit round trip; it
 * resolves to `claim`'s rows. It resolves to `undefined` — nothing written — whenever it cannot do it here and
 * now (statements that will not prepare, a driver without the means, any error but a lock timeout or a
 * conflict); the store then takes the usual path, which meets and reports the same error.
 */
export interface StatementFastPath {
  run(claim: SqlStatement, statements: readonly { readonly owner: string; readonly statement: SqlStatement }[]): Promise<SqlRow[] | undefined>;
}

/**
 * How the store reaches Postgres, with transactions of type `Tx`. Rejections that are Postgres' own errors
 * carry the SQLSTATE as `code` (as node-postgres reports it); any other rejection is taken for a lost connection.
 *
 * @example
 * const store = new PostgresInboxStore({ seam: kyselySeam(db) }); // what `new PostgresInboxStore({ db })` does
 */
export interface SqlSeam<Tx> {
  /** Runs one statement outside any transaction (autocommit), on a pooled connection. */
  query(statement: SqlStatement): Promise<SqlRow[]>;
  /**
   * Runs `work` in a transaction on one connection, and ends it as `work` says. Resolves to `work`'s value once
   * the COMMIT committed (or the ROLLBACK was sent). Rejects: when `first` fails, with its error (the transaction
   * rolled back, `work` never called); when `work` rejects, with its error after a ROLLBACK; when COMMIT fails,
   * with its error — `code` `25P02` when Postgres found the transaction aborted and committed nothing (a failed
   * statement inside it was caught); when the connection fails at any point, with that failure; with a
   * `TransactionControlError` when the handler ended or tried to end the transaction through `tx` (COMMIT,
   * ROLLBACK …, see transaction-control.ts) and `transactionControl()` did not hand it over — after rolling back
   * whatever is still open, whatever `work` said. The connection is never handed back to a pool inside the
   * transaction.
   */
  transaction<T>(work: TransactionWork<Tx, T>, options?: TransactionOptions): Promise<T>;
  /** Present when this implementation can run a statement handler's delivery in one round trip. */
  readonly statementFastPath?: StatementFastPath;
}

/** The SQLSTATE of a Postgres error, if any (`code`, as every seam reports it). */
export function sqlState(error: unknown): string | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  // Class first: a digit, or one of Postgres' lettered classes (Node's `EPIPE` is five capitals too).
  return typeof code === 'string' && /^([0-9][0-9A-Z]|F0|HV|P0|XX)[0-9A-Z]{3}$/.test(code) ? code : undefined;
}

/**
 * True when `error` is Postgres' answer about the statement or the transaction, not the loss of the connection
 * or of the server (classes 08, 53, 57, 58, XX), after which the outcome of a COMMIT is unknown.
 */
export function isStatementError(error: unknown): boolean {
  const state = sqlState(error);
  return state !== undefined && !/^(08|53|57|58|XX)/.test(state);
}
