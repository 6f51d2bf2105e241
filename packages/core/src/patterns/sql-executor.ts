// The one thing the patterns need from a transaction: run a statement with parameters and get its rows. A
// Kysely transaction (or instance), a node-postgres client, or any object with `execute(sql, params)` will do,
// so the patterns' SQL runs over whatever carries the handler's effect.

import { CompiledQuery } from 'kysely';

/** A row as the driver returns it: column name → value. */
export type SqlRow = Readonly<Record<string, unknown>>;

/**
 * The minimal executor the patterns run their SQL on: one statement with `$1, $2, …` placeholders and its
 * parameters in, the rows out. Implement it for a driver the patterns do not recognise (postgres.js:
 * `{ execute: (text, params) => sql.unsafe(text, params) }`).
 *
 * @example
 * const executor: SqlExecutor = { execute: async (text, params) => (await client.query(text, [...params])).rows };
 */
export interface SqlExecutor {
  execute(sql: string, parameters: readonly unknown[]): Promise<readonly SqlRow[]>;
}

/** Kysely's `Transaction` or `Kysely`: the slice the patterns use. */
interface KyselyLike {
  executeQuery(query: CompiledQuery): Promise<{ readonly rows: readonly unknown[] }>;
}

/** node-postgres' `Client` / `PoolClient`: the slice the patterns use. */
interface PgClientLike {
  query(text: string, values: unknown[]): Promise<{ readonly rows: readonly unknown[] }>;
}

/**
 * What the patterns accept as the transaction to run on: a `SqlExecutor`, a Kysely `Transaction` (the handler's
 * `context.tx` with `PostgresInboxStore`) or `Kysely` instance, or a node-postgres client inside BEGIN.
 */
export type SqlTransaction = SqlExecutor | KyselyLike | PgClientLike;

/**
 * The `SqlExecutor` of `tx`. Throws a `TypeError` naming what it got when `tx` is none of the accepted shapes.
 *
 * @example
 * const rows = await sqlExecutorOf(context.tx).execute('SELECT now() AS at', []);
 */
export function sqlExecutorOf(tx: SqlTransaction): SqlExecutor {
  const candidate = tx as Partial<SqlExecutor & KyselyLike & PgClientLike> | null | undefined;
  if (candidate === null || candidate === undefined || typeof candidate !== 'object') {
    throw new TypeError(
      `inboxkit patterns: expected a transaction (Kysely, node-postgres or SqlExecutor), got ${tx === null ? 'null' : typeof tx}`,
    );
  }
  if (typeof candidate.executeQuery === 'function') {
    const kysely = candidate as KyselyLike;
    return {
      execute: async (sql, parameters) =>
        (await kysely.executeQuery(CompiledQuery.raw(sql, [...parameters]))).rows as SqlRow[],
    };
  }
  if (typeof candidate.execute === 'function') return candidate as SqlExecutor;
  if (typeof candidate.query === 'function') {
    const client = candidate as PgClientLike;
    return {
      execute: async (sql, parameters) => (await client.query(sql, [...parameters])).rows as SqlRow[],
    };
  }
  throw new TypeError(
    'inboxkit patterns: expected a transaction with executeQuery (Kysely), query (node-postgres) or execute (SqlExecutor)',
  );
}
