// Quoting of the table and column names the patterns put into their SQL. Names come from the application's
// code, never from messages; they are still quoted, so a reserved word or a capital letter works as written.

/** A table: `'orders'`, `'sales.orders'`, or `{ schema: 'sales', name: 'orders' }`. */
export type TableName = string | { readonly schema?: string; readonly name: string };

/**
 * `"name"`, with embedded quotes doubled. Throws a `TypeError` for an empty name or a NUL character.
 *
 * @example
 * quoteIdentifier('order'); // '"order"' (a reserved word, usable as written)
 */
export function quoteIdentifier(name: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.includes('\0')) {
    throw new TypeError(`inboxkit patterns: invalid SQL identifier ${JSON.stringify(name)}`);
  }
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The quoted, schema-qualified name of a table (`'a.b'` is schema `a`, table `b`; without a schema, the
 * connection's `search_path` decides).
 *
 * @example
 * quoteTable('sales.orders'); // '"sales"."orders"'
 * quoteTable({ schema: 'Sales', name: 'orders' }); // '"Sales"."orders"'
 */
export function quoteTable(table: TableName): string {
  if (typeof table === 'string') {
    const dot = table.indexOf('.');
    return dot < 0
      ? quoteIdentifier(table)
      : `${quoteIdentifier(table.slice(0, dot))}.${quoteIdentifier(table.slice(dot + 1))}`;
  }
  return table.schema === undefined
    ? quoteIdentifier(table.name)
    : `${quoteIdentifier(table.schema)}.${quoteIdentifier(table.name)}`;
}

/** A readable name of a table for metrics and errors (unquoted). */
export function tableLabel(table: TableName): string {
  return typeof table === 'string'
    ? table
    : table.schema === undefined
      ? table.name
      : `${table.schema}.${table.name}`;
}
