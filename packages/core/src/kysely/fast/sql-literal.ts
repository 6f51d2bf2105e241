// SQL literals for the simple query protocol, which is what lets several statements share a round trip and
// allows no bind parameters: a statement's `$n` become literals here, every value through these functions,
// never through concatenation.

import type { SqlStatement } from '../../postgres/sql-seam.js';

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

/** node-postgres' conversion of a query parameter to what it sends (text, a Buffer, or null). */
export type ParameterText = (value: unknown) => unknown;

/** node-postgres' own parameter conversion (`prepareValue`), or `undefined` when it cannot be loaded. */
export async function loadPgParameterText(): Promise<ParameterText | undefined> {
  try {
    const path = 'pg/lib/utils.js'; // not in pg's types; its package exports ./lib/*
    const utils = (await import(path)) as { prepareValue?: unknown; default?: { prepareValue?: unknown } };
    const prepare = utils.prepareValue ?? utils.default?.prepareValue;
    return typeof prepare === 'function' ? (prepare as ParameterText) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * EXECUTE arguments for a prepared statement's parameters: each value converted as node-postgres converts a
 * bind parameter (`toText`), then written as an untyped string literal, which Postgres casts to the parameter's
 * type as it would cast the bind parameter's text. `undefined` when a value cannot travel as text the same way:
 * binary data (node-postgres binds a Buffer in binary format) or a NUL character (which Postgres text refuses
 * whichever way it comes, so the usual path reports it).
 */
export function executeArguments(parameters: readonly unknown[], toText: ParameterText): string[] | undefined {
  const out: string[] = [];
  for (const value of parameters) {
    if (value === null || value === undefined) {
      out.push('NULL');
      continue;
    }
    if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return undefined;
    const text = toText(value);
    if (text === null || text === undefined) out.push('NULL');
    else if (typeof text !== 'string' || text.includes('\u0000')) return undefined;
    else out.push(sqlString(text));
  }
  return out;
}
