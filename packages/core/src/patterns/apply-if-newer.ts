// The version guard for reordered events: write a row only when the event is newer than what the row holds.
// Brokers redeliver and reorder (retries on RabbitMQ and SQS standard queues, webhooks always): a late older
// event must change nothing, and the caller must learn that it did not, to count it.

import type { MeterProvider } from '@opentelemetry/api';
import { patternCounter, PATTERN_METRIC_NAMES } from './pattern-metrics.js';
import { sqlExecutorOf, type SqlTransaction } from './sql-executor.js';
import { quoteIdentifier, quoteTable, tableLabel, type TableName } from './sql-identifier.js';

/** What `applyIfNewer` writes. */
export interface ApplyIfNewerOptions {
  /** The table of the row (`'invoices'`, `'billing.invoices'`). */
  readonly table: TableName;
  /** The row's key: column → value. Must be the columns of a primary key or unique constraint. */
  readonly key: Readonly<Record<string, unknown>>;
  /**
   * The version column and this event's version: a number, a bigint, a `Date` (an event time) or anything
   * Postgres orders. The write happens only when the row's version is lower (or NULL).
   */
  readonly version: { readonly column: string; readonly value: unknown };
  /** The other columns to write: column → value. */
  readonly values: Readonly<Record<string, unknown>>;
  /**
   * `true`: insert the row when it does not exist (one upsert statement). `false`: update only; a missing row
   * is reported as `missing`. Default is `true`.
   */
  readonly insert?: boolean;
  /** Where the stale-update counter goes. Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: MeterProvider;
}

/** What `applyIfNewer` did. */
export type ApplyIfNewerResult =
  /** The event was newer (or the row new): written. `inserted` tells a new row from an update. */
  | { readonly applied: true; readonly inserted: boolean }
  /**
   * Nothing written. `stale`: the row's version was the same or newer — a redelivery or a late older event
   * (counted in `inboxkit.patterns.stale_updates`). `missing`: no row, and `insert: false`.
   */
  | { readonly applied: false; readonly reason: 'stale' | 'missing' };

/**
 * Writes `values` and the version to the row of `key` only when `version.value` is greater than the row's
 * version, in one statement on `tx` (`INSERT … ON CONFLICT (key) DO UPDATE … WHERE version < $v`, or
 * `UPDATE … WHERE version < $v` with `insert: false`). An equal version is not newer: a redelivery of the
 * same event changes nothing. Safe under concurrency: two events for one row serialise on its row lock, and
 * the newer one wins whatever order they commit in.
 *
 * Run it on the handler's transaction, so that it commits with the inbox record.
 *
 * @example
 * const result = await applyIfNewer(context.tx, {
 *   table: 'invoices',
 *   key: { invoice_id: invoice.id },
 *   version: { column: 'last_event_at', value: new Date(event.created * 1000) },
 *   values: { status: invoice.status, amount_cents: invoice.amount_due },
 * });
 * if (!result.applied) logger.info({ eventId: event.id }, 'older than the invoice: ignored');
 */
export async function applyIfNewer(
  tx: SqlTransaction,
  options: ApplyIfNewerOptions,
): Promise<ApplyIfNewerResult> {
  const executor = sqlExecutorOf(tx);
  const keyColumns = Object.keys(options.key);
  if (keyColumns.length === 0) throw new TypeError('applyIfNewer: key needs at least one column');
  const valueColumns = Object.keys(options.values).filter(
    (c) => c !== options.version.column && !(c in options.key),
  );
  const table = quoteTable(options.table);
  const version = quoteIdentifier(options.version.column);
  const parameters: unknown[] = [];
  const param = (value: unknown): string => `$${parameters.push(value)}`;
  let result: ApplyIfNewerResult;
  if (options.insert ?? true) {
    const columns = [...keyColumns, options.version.column, ...valueColumns];
    const values = [
      ...keyColumns.map((c) => options.key[c]),
      options.version.value,
      ...valueColumns.map((c) => options.values[c]),
    ];
    const placeholders = values.map(param);
    const set = [options.version.column, ...valueColumns].map(
      (c) => `${quoteIdentifier(c)} = EXCLUDED.${quoteIdentifier(c)}`,
    );
    const rows = await executor.execute(
      `INSERT INTO ${table} AS t (${columns.map(quoteIdentifier).join(', ')}) VALUES (${placeholders.join(', ')}) ` +
        `ON CONFLICT (${keyColumns.map(quoteIdentifier).join(', ')}) DO UPDATE SET ${set.join(', ')} ` +
        `WHERE t.${version} IS NULL OR t.${version} < EXCLUDED.${version} ` +
        // xmax is 0 on a row version this statement inserted, and set on one it updated.
        `RETURNING (t.xmax = 0) AS inserted`,
      parameters,
    );
    const row = rows[0];
    result =
      row === undefined
        ? { applied: false, reason: 'stale' }
        : { applied: true, inserted: row['inserted'] === true };
  } else {
    // $1 is the event's version; the SET list and the key follow.
    const versionParam = param(options.version.value);
    const set = [
      `${version} = ${versionParam}`,
      ...valueColumns.map((c) => `${quoteIdentifier(c)} = ${param(options.values[c])}`),
    ];
    const where = keyColumns.map((c) => `${quoteIdentifier(c)} = ${param(options.key[c])}`).join(' AND ');
    const updated = await executor.execute(
      `UPDATE ${table} SET ${set.join(', ')} WHERE ${where} AND (${version} IS NULL OR ${version} < ${versionParam}) RETURNING 1 AS updated`,
      parameters,
    );
    if (updated.length > 0) result = { applied: true, inserted: false };
    else {
      // The rare path: tell a stale event from a row that is not there.
      const found = await executor.execute(
        `SELECT 1 AS found FROM ${table} WHERE ${keyColumns.map((c, i) => `${quoteIdentifier(c)} = $${i + 1}`).join(' AND ')}`,
        keyColumns.map((c) => options.key[c]),
      );
      result = { applied: false, reason: found.length > 0 ? 'stale' : 'missing' };
    }
  }
  if (!result.applied && result.reason === 'stale') {
    patternCounter(
      PATTERN_METRIC_NAMES.staleUpdates,
      'Updates refused by a version guard',
      options.meterProvider,
    ).add(1, {
      table: tableLabel(options.table),
    });
  }
  return result;
}
