// SQL literals for the simple query protocol, which is what lets several statements share a round trip and
// allows no bind parameters: a statement's `$n` become literals here, every value through these functions,
// never through concatenation. Used by the Kysely seam's fast paths (../kysely/fast) and by @inboxkit/data's
// node-postgres seams; it lives beside the seam's types, not in a fast-path folder, so that deleting that
// folder leaves every importer of `literalStatement` compiling.

import type { SqlStatement } from './sql-seam.js';

/**
 * A string literal that is correct whatever `standard_conforming_strings` says: quotes doubled and, when a
 * backslash occurs, the `E'…'` form with backslashes doubled (the rules of libpq's PQescapeLiteral). NUL,
 * which Postgres text cannot hold, becomes U+FFFD.
 */
export function sqlString(value: string): string {
  if (!value.includes("'") && !value.includes('\\') && !value.includes('\u0000')) return `'${value}'`;
  let text = value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value;
  text = text.replaceAll("'", "''");
  if (text.includes('\\')) return ` E'${text.replaceAll('\\', '\\\\')}'`;
  return `'${text}'`;
}

/** One parameter as an untyped literal (the statement's cast types it), or an ARRAY of them. */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return `ARRAY[${value.map(literal).join(',')}]`;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError('invalid date');
    return `'${value.toISOString()}'`;
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`not a finite number: ${value}`);
    return `'${value}'`;
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return sqlString(value);
  throw new TypeError(`no literal for a ${typeof value} parameter`);
}

/**
 * The statement with its parameters written in as literals. Every `$n` of the store's statements is followed by
 * a cast (`$1::text`), which types the literal as the bind parameter would have been typed.
 */
export function literalStatement(statement: SqlStatement): string {
  // Text and parameter numbers alternating.
  const parts = statement.sql.split(/\$(\d+)/);
  let out = parts[0]!;
  for (let i = 1; i < parts.length; i += 2)
    out += literal(statement.parameters[Number(parts[i]) - 1]) + parts[i + 1]!;
  return out;
}
