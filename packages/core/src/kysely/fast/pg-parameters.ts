// node-postgres' conversion of a bind parameter, reused for the EXECUTE arguments of statement-once.ts's
// prepared statements: the value Postgres receives is the same text either way.

import { sqlString } from '../../postgres/sql-literal.js';

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
export function executeArguments(
  parameters: readonly unknown[],
  toText: ParameterText,
): string[] | undefined {
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
