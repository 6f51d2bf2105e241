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
 * True when `connection` is inside an aborted transaction: read from the client without a round trip where
 * node-postgres reports it, else asked with a statement (which fails with 25P02 in an aborted transaction).
 */
export async function abortedOn(connection: PgConnection): Promise<boolean> {
  const status =
    typeof connection.getTransactionStatus === 'function' ? connection.getTransactionStatus() : null;
  if (status === 'E') return true;
  if (status === 'T') return false;
  try {
    await connection.query('SELECT 1');
    return false;
  } catch (error) {
    if ((error as { code?: unknown }).code === '25P02') return true;
    throw error;
  }
}
