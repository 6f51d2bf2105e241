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
  const { text, slots } = splitAtParameters(statement.sql);
  let out = text[0]!;
  for (let i = 0; i < slots.length; i++) out += literal(statement.parameters[slots[i]!]) + text[i + 1]!;
  return out;
}

/** A statement's text around its `$n`, and the parameter index (n - 1) of each. */
interface SplitStatement {
  readonly text: readonly string[];
  readonly slots: readonly number[];
}

/**
 * The store sends a few statement texts over and over (the claim above all): each is split once. Bounded, so
 * texts that vary (an IN list of n ids) cannot grow it without end; past the bound a text is split each time.
 */
const SPLIT_TEXTS = new Map<string, SplitStatement>();
const SPLIT_TEXTS_KEPT = 256;

function splitAtParameters(sql: string): SplitStatement {
  const known = SPLIT_TEXTS.get(sql);
  if (known !== undefined) return known;
  // Text and parameter numbers alternating.
  const parts = sql.split(/\$(\d+)/);
  const split: SplitStatement = {
    text: parts.filter((_, i) => i % 2 === 0),
    slots: parts.filter((_, i) => i % 2 === 1).map((n) => Number(n) - 1),
  };
  if (SPLIT_TEXTS.size < SPLIT_TEXTS_KEPT) SPLIT_TEXTS.set(sql, split);
  return split;
}
