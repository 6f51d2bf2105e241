// Compare-and-set on an expected version: write a row only if nobody changed it since it was read. A handler
// that reads a row, decides, and writes it back loses a concurrent writer's change unless the write is
// conditional on the version it read (optimistic concurrency).

import type { MeterProvider } from '@opentelemetry/api';
import { patternCounter, PATTERN_METRIC_NAMES } from './pattern-metrics.js';
import { sqlExecutorOf, type SqlTransaction } from './sql-executor.js';
import { quoteIdentifier, quoteTable, tableLabel, type TableName } from './sql-identifier.js';

/** What `compareAndSet` writes. */
export interface CompareAndSetOptions {
  /** The table of the row (`'accounts'`, `'billing.accounts'`). */
  readonly table: TableName;
  /** The row's key: column → value. Must be the columns of a primary key or unique constraint. */
  readonly key: Readonly<Record<string, unknown>>;
  /**
   * The integer version column and the version the caller read. The write happens only when the row still
   * holds `expected`; the version is then incremented by one.
   */
  readonly version: { readonly column: string; readonly expected: number | bigint };
  /** The columns to write: column → value. */
  readonly values: Readonly<Record<string, unknown>>;
  /** Where the conflict counter goes. Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: MeterProvider;
}

/** What `compareAndSet` did. */
export type CompareAndSetResult =
  /** The row still held the expected version: written, and its version is now `version` (expected + 1). */
  | { readonly applied: true; readonly version: bigint }
  /**
   * Nothing written. `conflict`: the row holds another version (`actual`, `null` when the column is NULL) —
   * someone wrote it since it was read (counted in `inboxkit.patterns.version_conflicts`); read it again and
   * decide again. `missing`: no row with `key` (`actual` is `undefined`).
   */
  | { readonly applied: false; readonly reason: 'conflict'; readonly actual: bigint | null }
  | { readonly applied: false; readonly reason: 'missing'; readonly actual: undefined };

/**
 * Writes `values` to the row of `key` and increments its version, only when the version is still
 * `version.expected`, in one statement on `tx`: `UPDATE … SET …, version = version + 1 WHERE key AND version =
 * $expected RETURNING version`. Safe under concurrency: of many writers that read the same version, exactly one
 * applies (the others wait for its row lock, then find the version changed), and each later one must read again.
 * On a miss a second statement tells a conflict from a missing row. Run it on the handler's transaction.
 *
 * @example
 * const account = await readAccount(context.tx, id); // { balance, version }
 * const result = await compareAndSet(context.tx, {
 *   table: 'accounts',
 *   key: { account_id: id },
 *   version: { column: 'version', expected: account.version },
 *   values: { balance: account.balance - amount },
 * });
 * if (!result.applied) throw new RetryableError(`account ${id} changed meanwhile (${result.reason})`);
 */
export async function compareAndSet(
  tx: SqlTransaction,
  options: CompareAndSetOptions,
): Promise<CompareAndSetResult> {
  const executor = sqlExecutorOf(tx);
  const keyColumns = Object.keys(options.key);
  if (keyColumns.length === 0) throw new TypeError('compareAndSet: key needs at least one column');
  const expected = options.version.expected;
  if (!(typeof expected === 'bigint' || Number.isSafeInteger(expected))) {
    throw new TypeError(
      `compareAndSet: version.expected must be a whole number or a bigint, got ${String(expected)}`,
    );
  }
  const table = quoteTable(options.table);
  const version = quoteIdentifier(options.version.column);
  const parameters: unknown[] = [];
  const param = (value: unknown): string => `$${parameters.push(value)}`;
  const where = keyColumns.map((c) => `${quoteIdentifier(c)} = ${param(options.key[c])}`).join(' AND ');
  const expectedParam = param(String(expected));
  const set = [
    `${version} = ${version} + 1`,
    ...Object.keys(options.values)
      .filter((c) => c !== options.version.column && !(c in options.key))
      .map((c) => `${quoteIdentifier(c)} = ${param(options.values[c])}`),
  ];
  const updated = await executor.execute(
    `UPDATE ${table} SET ${set.join(', ')} WHERE ${where} AND ${version} = ${expectedParam} RETURNING ${version}::text AS version`,
    parameters,
  );
  if (updated.length > 0) return { applied: true, version: BigInt(updated[0]!['version'] as string) }; // version::text
  const found = await executor.execute(
    `SELECT ${version}::text AS version FROM ${table} WHERE ${keyColumns.map((c, i) => `${quoteIdentifier(c)} = $${i + 1}`).join(' AND ')}`,
    keyColumns.map((c) => options.key[c]),
  );
  if (found.length === 0) return { applied: false, reason: 'missing', actual: undefined };
  patternCounter(
    PATTERN_METRIC_NAMES.versionConflicts,
    'Compare-and-set writes refused by a changed version',
    options.meterProvider,
  ).add(1, {
    table: tableLabel(options.table),
  });
  const actual = found[0]!['version'];
  return {
    applied: false,
    reason: 'conflict',
    actual: typeof actual === 'string' ? BigInt(actual) : null, // version::text: a string, or null
  };
}
