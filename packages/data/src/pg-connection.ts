// What the library-owned adapters over node-postgres (Knex, TypeORM) do on the pg client they reach: run a
// store statement with bind parameters, and tell an aborted transaction from the client's own state.

import type { SqlRow, SqlStatement } from '@inboxkit/core/postgres';

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
 * proves nothing: `watchCommit` then catches what this cannot.
 */
export function abortedOn(connection: PgConnection): Promise<boolean> {
  const status =
    typeof connection.getTransactionStatus === 'function' ? connection.getTransactionStatus() : null;
  return Promise.resolve(status === 'E');
}

type Callback = (error: unknown, result?: unknown) => void;

/**
 * Watches the COMMIT the library sends on `connection` (held by the seam alone until `stop()`): Postgres answers
 * the COMMIT of an aborted transaction with the tag `ROLLBACK`, and no error, which the libraries ignore.
 * `rolledBack` is true once such an answer came.
 */
export function watchCommit(connection: PgConnection): { readonly rolledBack: boolean; stop(): void } {
  const target = connection as unknown as { query: (...args: unknown[]) => unknown };
  const own = Object.prototype.hasOwnProperty.call(target, 'query');
  const original = target.query;
  let rolledBack = false;
  const seen = (result: unknown): void => {
    if ((result as { command?: unknown } | undefined)?.command === 'ROLLBACK') rolledBack = true;
  };
  target.query = function (this: unknown, ...args: unknown[]): unknown {
    const first = args[0] as string | { text?: unknown } | undefined;
    const text = typeof first === 'string' ? first : first?.text;
    if (typeof text !== 'string' || !/^\s*COMMIT\b/i.test(text)) return original.apply(this, args);
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as Callback;
      const watched: Callback = (error, result) => {
        if (!error) seen(result);
        callback(error, result);
      };
      args[last] = watched;
      return original.apply(this, args);
    }
    const answer = original.apply(this, args);
    return answer instanceof Promise ? answer.then((result: unknown) => (seen(result), result)) : answer;
  };
  return {
    get rolledBack() {
      return rolledBack;
    },
    stop() {
      if (own) target.query = original;
      else delete (target as { query?: unknown }).query;
    },
  };
}
