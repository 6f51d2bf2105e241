// What the library-owned adapters over node-postgres (Knex, TypeORM) do on the pg client they reach: run a
// store statement with bind parameters, and tell an aborted transaction from the client's own state.

import { literalStatement, type SqlRow, type SqlStatement, type TransactionControlWatch } from '@inboxkit/core/postgres';

/** The slice of a node-postgres client the adapters use. */
export interface PgConnection {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  /** `'E'` inside a failed transaction (node-postgres ≥ 8.16 reads it from every ReadyForQuery). */
  getTransactionStatus?(): string | null;
}

/** Runs `statement` on `connection`. */
export async function queryOn(connection: PgConnection, statement: SqlStatement): Promise<SqlRow[]> {
  return (await connection.query(statement.sql, statement.parameters as unknown[])).rows as SqlRow[];
}

/**
 * True when `connection` is known to be inside an aborted transaction, read from the client without a round
 * trip. node-postgres reports a failed statement before the ReadyForQuery that updates the status, so `false`
 * proves nothing: `watchConnection` then catches what this cannot.
 */
export function abortedOn(connection: PgConnection): Promise<boolean> {
  const status =
    typeof connection.getTransactionStatus === 'function' ? connection.getTransactionStatus() : null;
  return Promise.resolve(status === 'E');
}

/**
 * What ended the transaction on `connection`, read from the client without a round trip: node-postgres keeps
 * the status Postgres reports with every ReadyForQuery, and `I` (idle) inside the seam's transaction means a
 * COMMIT or ROLLBACK the library did not send at the end.
 */
export function endedOn(connection: PgConnection): string | undefined {
  const status = typeof connection.getTransactionStatus === 'function' ? connection.getTransactionStatus() : null;
  return status === 'I' ? 'a COMMIT or ROLLBACK the store did not send' : undefined;
}

type Callback = (error: unknown, result?: unknown) => void;

/** What `watchConnection` reads on a connection the seam holds. */
export interface WatchedConnection {
  /** True once Postgres answered the library's COMMIT with `ROLLBACK` (an aborted transaction). */
  readonly rolledBack: boolean;
  /**
   * The rows of the statement sent with the library's BEGIN; `undefined` when no BEGIN went out with it (none was
   * given, or the library's BEGIN did not come as expected), and then it never will: the caller sends it itself.
   */
  firstRows(): Promise<SqlRow[]> | undefined;
  /** Runs a store statement on the connection, past the watch. */
  query(statement: SqlStatement): Promise<SqlRow[]>;
  /**
   * While true (the handler runs), every statement sent on the connection is the handler's: those that control
   * the transaction are refused, unsent, through the `watch` given.
   */
  handling: boolean;
  /** Restores the connection's own `query`. */
  stop(): void;
}

/** The library's BEGIN, as Knex (`BEGIN;`, `BEGIN TRANSACTION …;`) and TypeORM (`START TRANSACTION`) send it. */
const BEGIN = /^\s*(BEGIN|START\s+TRANSACTION)\b[^;]*;?\s*$/i;
const COMMIT = /^\s*COMMIT\b/i;

/**
 * Watches what the library sends on `connection` (held by the seam alone until `stop()`):
 * - its COMMIT: Postgres answers the COMMIT of an aborted transaction with the tag `ROLLBACK`, and no error,
 *   which the libraries ignore (`rolledBack`);
 * - its BEGIN, when `first` is given: sent as one simple-protocol query with `first` (its parameters as SQL
 *   literals), so that the library's BEGIN and the store's first statement share one round trip. The library
 *   gets BEGIN's own result; `firstRows()` the statement's rows. When that statement fails, the connection is
 *   rolled back before the library hears of it (its BEGIN then rejects with the statement's error).
 */
export function watchConnection(
  connection: PgConnection,
  first?: SqlStatement,
  watch?: TransactionControlWatch,
): WatchedConnection {
  const target = connection as unknown as { query: (...args: unknown[]) => unknown };
  const own = Object.prototype.hasOwnProperty.call(target, 'query');
  const original = target.query;
  let rolledBack = false;
  let handling = false;
  // Written out now: a statement that cannot be (a parameter with no literal form) goes unpiggybacked.
  let armed: string | undefined;
  try {
    armed = first === undefined ? undefined : literalStatement(first);
  } catch {
    armed = undefined;
  }
  let rows: Promise<SqlRow[]> | undefined;
  const seen = (result: unknown): void => {
    if ((result as { command?: unknown } | undefined)?.command === 'ROLLBACK') rolledBack = true;
  };
  target.query = function (this: unknown, ...args: unknown[]): unknown {
    const head = args[0] as string | { text?: unknown; values?: unknown } | undefined;
    const text = typeof head === 'string' ? head : head?.text;
    if (typeof text !== 'string') return original.apply(this, args);
    const last = args.length - 1;
    const callback = typeof args[last] === 'function' ? (args[last] as Callback) : undefined;
    const refused = handling ? watch?.refuse(text) : undefined;
    if (refused !== undefined) {
      if (callback === undefined) return Promise.reject(refused);
      queueMicrotask(() => callback(refused));
      return undefined;
    }
    if (armed !== undefined && BEGIN.test(text) && withoutValues(head, args[1])) {
      const statement = armed;
      armed = undefined;
      const both = (
        original.call(this, `${text.trim().replace(/;$/, '')};\n${statement}`) as Promise<unknown>
      ).then(
        (results) =>
          Array.isArray(results) ? (results as { rows?: unknown }[]) : [results as { rows?: unknown }],
        async (error: unknown) => {
          // BEGIN ran and the statement failed: the transaction is aborted. End it before the library hears.
          await (original.call(this, 'ROLLBACK') as Promise<unknown>).catch(() => undefined);
          throw error;
        },
      );
      rows = both.then((results) => (results[1]?.rows ?? []) as SqlRow[]);
      rows.catch(() => undefined); // observed by firstRows' caller, or never asked for (BEGIN rejected)
      const begun = both.then((results) => results[0]);
      if (callback === undefined) return begun;
      begun.then(
        (result) => callback(undefined, result),
        (error: unknown) => callback(error),
      );
      return undefined;
    }
    if (!COMMIT.test(text)) return original.apply(this, args);
    if (callback !== undefined) {
      args[last] = (error: unknown, result?: unknown) => {
        if (!error) seen(result);
        callback(error, result);
      };
      return original.apply(this, args);
    }
    const answer = original.apply(this, args);
    return answer instanceof Promise ? answer.then((result: unknown) => (seen(result), result)) : answer;
  };
  return {
    get rolledBack() {
      return rolledBack;
    },
    firstRows() {
      armed = undefined;
      return rows;
    },
    async query(statement) {
      const result = (await original.call(target, statement.sql, statement.parameters as unknown[])) as { rows: unknown[] };
      return result.rows as SqlRow[];
    },
    get handling() {
      return handling;
    },
    set handling(on: boolean) {
      handling = on;
    },
    stop() {
      if (own) target.query = original;
      else delete (target as { query?: unknown }).query;
    },
  };
}

/** True when a query call carries no bind values (only those can share a simple-protocol round trip). */
function withoutValues(head: unknown, second: unknown): boolean {
  const values = typeof head === 'object' && head !== null ? (head as { values?: unknown }).values : second;
  return values === undefined || values === null || (Array.isArray(values) && values.length === 0);
}
