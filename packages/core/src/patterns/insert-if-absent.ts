// The natural-key guard: insert-or-ignore on the domain's own unique key. The inbox deduplicates by message id;
// when a producer publishes one intent under two ids (a retry that mints a new id, two services emitting the
// same order), only the domain's key can tell, and the second insert must change nothing and say so.

import type { MeterProvider } from '@opentelemetry/api';
import { patternCounter, PATTERN_METRIC_NAMES } from './pattern-metrics.js';
import { sqlExecutorOf, type SqlRow, type SqlTransaction } from './sql-executor.js';
import { quoteIdentifier, quoteTable, tableLabel, type TableName } from './sql-identifier.js';

/** What `insertIfAbsent` inserts. */
export interface InsertIfAbsentOptions {
  /** The table (`'orders'`, `'sales.orders'`). */
  readonly table: TableName;
  /** The row: column → value. Must include every column of `key`. */
  readonly values: Readonly<Record<string, unknown>>;
  /** The columns of the natural key: a primary key or unique constraint of the table, e.g. `['order_no']`. */
  readonly key: readonly string[];
  /**
   * Columns of the row already there to return when the key was taken, e.g. the message id it was first
   * applied under. Default is none (no second statement is sent).
   */
  readonly existing?: readonly string[];
  /** Where the conflict counter goes. Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: MeterProvider;
}

/** What `insertIfAbsent` did. */
export type InsertIfAbsentResult =
  | { readonly inserted: true }
  /**
   * The key was taken: nothing written (counted in `inboxkit.patterns.natural_key_conflicts`). `existing` holds
   * the requested columns of the row that has it (undefined if none were asked for, or it was deleted since).
   */
  | { readonly inserted: false; readonly existing: SqlRow | undefined };

/**
 * Inserts `values` unless a row with the same natural key exists (`INSERT … ON CONFLICT (key) DO NOTHING`), on
 * `tx`, and reports which. A concurrent insert of the same key waits for the other transaction: if it commits,
 * this one reports `inserted: false`; if it rolls back, this one inserts. With `existing`, the row that holds
 * the key is read in a second statement, only on a conflict.
 *
 * Run it on the handler's transaction, first: when the key was taken, return without applying the rest of the
 * effect (the message is then completed in the inbox as applied once, under its first id).
 *
 * @example
 * const order = await insertIfAbsent(context.tx, {
 *   table: 'orders',
 *   values: { order_no: o.orderNo, total_cents: o.total, message_id: message.id },
 *   key: ['order_no'],
 *   existing: ['message_id'],
 * });
 * if (!order.inserted) return; // the same order under another message id: applied once already
 */
export async function insertIfAbsent(
  tx: SqlTransaction,
  options: InsertIfAbsentOptions,
): Promise<InsertIfAbsentResult> {
  const executor = sqlExecutorOf(tx);
  const columns = Object.keys(options.values);
  if (options.key.length === 0) throw new TypeError('insertIfAbsent: key needs at least one column');
  for (const column of options.key) {
    if (!columns.includes(column))
      throw new TypeError(`insertIfAbsent: values has no ${JSON.stringify(column)}, a column of the key`);
  }
  const table = quoteTable(options.table);
  const values = columns.map((c) => options.values[c]);
  const rows = await executor.execute(
    `INSERT INTO ${table} (${columns.map(quoteIdentifier).join(', ')}) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')}) ` +
      `ON CONFLICT (${options.key.map(quoteIdentifier).join(', ')}) DO NOTHING RETURNING 1 AS inserted`,
    values,
  );
  if (rows.length > 0) return { inserted: true };
  patternCounter(
    PATTERN_METRIC_NAMES.naturalKeyConflicts,
    'Natural-key inserts that found the key taken',
    options.meterProvider,
  ).add(1, {
    table: tableLabel(options.table),
  });
  const wanted = options.existing ?? [];
  if (wanted.length === 0) return { inserted: false, existing: undefined };
  // A new statement, so a new snapshot under READ COMMITTED: it sees the row of a concurrent insert that won.
  const found = await executor.execute(
    `SELECT ${wanted.map(quoteIdentifier).join(', ')} FROM ${table} WHERE ${options.key.map((c, i) => `${quoteIdentifier(c)} = $${i + 1}`).join(' AND ')}`,
    options.key.map((c) => options.values[c]),
  );
  return { inserted: false, existing: found[0] };
}
