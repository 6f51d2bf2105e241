// SQL literals for the inbox's own statements. They are sent with the simple query protocol so that BEGIN,
// the claim and a state read share one round trip, which rules out bind parameters; every value therefore
// goes through these functions (and identifiers through inbox-table-names.ts), never through concatenation.

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

/** A text literal, or NULL. */
export function sqlText(value: string | null | undefined): string {
  return value === null || value === undefined ? 'NULL::text' : `${sqlString(value)}::text`;
}

/** An integer literal; throws on anything but a safe integer (never reaches SQL otherwise). */
export function sqlInt(value: number): string {
  if (!Number.isSafeInteger(value)) throw new TypeError(`not a safe integer: ${String(value)}`);
  return String(value);
}

/** A timestamptz literal, or NULL. */
export function sqlTimestamp(value: Date | null | undefined): string {
  if (value === null || value === undefined) return 'NULL::timestamptz';
  if (Number.isNaN(value.getTime())) throw new TypeError('invalid date');
  return `'${value.toISOString()}'::timestamptz`;
}

/** An interval of whole milliseconds. */
export function sqlMillis(ms: number): string {
  return `make_interval(secs => ${sqlInt(Math.max(0, Math.round(ms)))}::float8 / 1000)`;
}

/** A jsonb literal, or NULL. */
export function sqlJson(value: unknown): string {
  if (value === null || value === undefined) return 'NULL::jsonb';
  // jsonb rejects the \u0000 escape: replace NUL before serialising.
  return `${sqlString(JSON.stringify(value, (_k, v: unknown) => (typeof v === 'string' ? v.replaceAll('\u0000', '\uFFFD') : v)))}::jsonb`;
}

/** A uuid literal, or NULL. Only canonical UUIDs pass. */
export function sqlUuid(value: string | null | undefined): string {
  if (value === null || value === undefined) return 'NULL::uuid';
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) throw new TypeError('not a uuid');
  return `'${value}'::uuid`;
}

/** A text[] literal. */
export function sqlTextArray(values: readonly string[]): string {
  return values.length === 0 ? `'{}'::text[]` : `ARRAY[${values.map(sqlString).join(',')}]::text[]`;
}

/**
 * EXECUTE arguments for a prepared statement's parameters: each value converted as node-postgres converts a
 * bind parameter (`toText`), then written as an untyped string literal, which Postgres casts to the parameter's
 * type as it would cast the bind parameter's text. `undefined` when a value cannot travel as text the same way:
 * binary data (node-postgres binds a Buffer in binary format) or a NUL character (which Postgres text refuses
 * whichever way it comes, so the usual path reports it).
 */
export function executeArguments(parameters: readonly unknown[], toText: (value: unknown) => unknown): string[] | undefined {
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
