// The identity of a table on Postgres, for the fast path's keys (a cache shared by two inboxes must never answer
// one with the other's entries): the cluster's system identifier, the database and the schema-qualified table.
// Read once per process, never per delivery.

import { randomUUID } from 'node:crypto';
import { sqlState, type SqlRow, type SqlStatement } from './sql-seam.js';

/** The statement: `pg_control_system()` is executable by every role by default; PGlite has it too. */
const DATABASE_IDENTITY: SqlStatement = {
  sql: 'SELECT system_identifier::text AS system, current_database() AS database FROM pg_control_system()',
  parameters: [],
};

/**
 * `postgres:<system identifier>:<database>:<qualified table>`: the same for every process on that table, and
 * different for another table, schema, database or cluster (a restored backup keeps its cluster's identifier:
 * see docs/fast-path.md). Where a role may not call `pg_control_system()` (permission revoked), the cluster
 * cannot be told apart, so the identity is random per call (`postgres-unidentified:<uuid>`): each process then
 * keeps the fast-path entries of its own, which is safe. Other errors reject (the caller asks again later).
 *
 * @example
 * const identity = await databaseIdentity((s) => seam.query(s), names.qualifiedTable);
 * // 'postgres:7715534942652537953:app:"inboxkit"."inbox"'
 */
export async function databaseIdentity(
  query: (statement: SqlStatement) => Promise<SqlRow[]>,
  qualifiedTable: string,
): Promise<string> {
  let rows: SqlRow[];
  try {
    rows = await query(DATABASE_IDENTITY);
  } catch (error) {
    if (sqlState(error) === '42501') return `postgres-unidentified:${randomUUID()}`;
    throw error;
  }
  const system = rows[0]?.['system'];
  const database = rows[0]?.['database'];
  if (typeof system !== 'string' || typeof database !== 'string') {
    throw new TypeError('pg_control_system() answered no system identifier');
  }
  return `postgres:${system}:${database}:${qualifiedTable}`;
}
