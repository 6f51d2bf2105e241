// Advisory-lock claims for work that has no row to lock: "one import per tenant at a time", "one rebuild of a
// customer's projection at a time". Transaction-scoped (released by the COMMIT or ROLLBACK that ends the
// handler's transaction, so a crash can never leave one held) and with a bounded wait, so a busy key becomes a
// retry instead of a connection parked for ever.

import type { MeterProvider } from '@opentelemetry/api';
import { RetryableError, type InboxkitErrorOptions } from '../errors.js';
import { patternCounter, PATTERN_METRIC_NAMES } from './pattern-metrics.js';
import { sqlExecutorOf, type SqlExecutor, type SqlTransaction } from './sql-executor.js';

/** Default of `AdvisoryLockOptions.waitMs`: the consumer's own default wait for a concurrent duplicate. */
export const DEFAULT_ADVISORY_LOCK_WAIT_MS = 5_000;

/** Which lock, and how long to wait for it. */
export interface AdvisoryLockOptions {
  /**
   * The lock's name: a string, or parts joined with `:` (`['import', tenantId]` is `import:<tenantId>`). Postgres
   * locks the 64-bit `hashtextextended(name, 0)`; the first part also labels the busy counter.
   */
  readonly key: string | readonly (string | number | bigint)[];
  /** How long to wait when another transaction holds the lock, in ms; 0 tries once. Default is 5,000 ms. */
  readonly waitMs?: number;
  /** Where the busy counter goes. Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: MeterProvider;
}

/** What `tryAdvisoryLock` got. */
export interface AdvisoryLockResult {
  /** True: held by this transaction until it ends. False: another transaction held it for all of `waitMs`. */
  readonly acquired: boolean;
  /** How long the call waited, in ms. */
  readonly waitedMs: number;
}

/** Thrown by `advisoryLock` when the lock stayed busy: retriable, so the delivery is retried later. */
export class AdvisoryLockBusyError extends RetryableError {
  readonly lock: string;
  constructor(lock: string, waitedMs: number, options: InboxkitErrorOptions & { delayMs?: number } = {}) {
    super(
      `the advisory lock ${JSON.stringify(lock)} is held by another transaction (waited ${Math.round(waitedMs)} ms)`,
      {
        ...options,
        code: 'ADVISORY_LOCK_BUSY',
      },
    );
    this.name = 'AdvisoryLockBusyError';
    this.lock = lock;
  }
}

/**
 * Takes a transaction-scoped advisory lock on `tx`, waiting at most `waitMs` (default 5 s). Call it inside a
 * transaction (the handler's `context.tx`): the lock is held until that transaction commits or rolls back, and
 * there is no unlock. An uncontended lock costs one statement. A contended one waits with `lock_timeout` inside a
 * savepoint, so a timeout leaves the transaction usable and `lock_timeout` as it was.
 *
 * @example
 * const lock = await tryAdvisoryLock(context.tx, { key: ['import', tenantId], waitMs: 0 });
 * if (!lock.acquired) return; // another import of this tenant runs now; it will pick this file up too
 */
export async function tryAdvisoryLock(
  tx: SqlTransaction,
  options: AdvisoryLockOptions,
): Promise<AdvisoryLockResult> {
  const executor = sqlExecutorOf(tx);
  const name = lockName(options.key);
  const waitMs = options.waitMs ?? DEFAULT_ADVISORY_LOCK_WAIT_MS;
  if (!Number.isFinite(waitMs) || waitMs < 0)
    throw new RangeError(`waitMs must be 0 or more milliseconds, got ${String(waitMs)}`);
  const started = performance.now();
  const [first] = await executor.execute(
    'SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS acquired',
    [name],
  );
  let acquired = first?.['acquired'] === true;
  if (!acquired && waitMs > 0) acquired = await waitForLock(executor, name, waitMs);
  const waitedMs = performance.now() - started;
  if (!acquired) {
    const label = Array.isArray(options.key) ? String(options.key[0]) : name;
    patternCounter(
      PATTERN_METRIC_NAMES.advisoryLockBusy,
      'Advisory-lock claims that gave up after their wait',
      options.meterProvider,
    ).add(1, {
      lock: label,
    });
  }
  return { acquired, waitedMs };
}

/**
 * Like `tryAdvisoryLock`, but throws `AdvisoryLockBusyError` (a `RetryableError`, code `ADVISORY_LOCK_BUSY`)
 * when the lock stays busy, so a handler's delivery is retried with `retryDelayMs` (default: the consumer's
 * backoff) instead of running beside the holder.
 *
 * @example
 * handler: async (message, { tx }) => {
 *   await advisoryLock(tx, { key: ['import', message.payload.tenantId], waitMs: 2_000 });
 *   await importFile(tx, message.payload); // one import per tenant at a time
 * }
 */
export async function advisoryLock(
  tx: SqlTransaction,
  options: AdvisoryLockOptions & { readonly retryDelayMs?: number },
): Promise<void> {
  const result = await tryAdvisoryLock(tx, options);
  if (!result.acquired) {
    throw new AdvisoryLockBusyError(
      lockName(options.key),
      result.waitedMs,
      options.retryDelayMs !== undefined ? { delayMs: options.retryDelayMs } : {},
    );
  }
}

/** The lock's text name: parts joined with `:`. */
export function lockName(key: AdvisoryLockOptions['key']): string {
  const name = typeof key === 'string' ? key : key.map(String).join(':');
  if (name.length === 0) throw new TypeError('advisory lock: key must not be empty');
  return name;
}

/** Postgres' error code for a lock wait ended by `lock_timeout`. */
const LOCK_NOT_AVAILABLE = '55P03';

async function waitForLock(executor: SqlExecutor, name: string, waitMs: number): Promise<boolean> {
  await executor.execute('SAVEPOINT inboxkit_advisory_lock', []);
  try {
    const [saved] = await executor.execute(
      "SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', $1, true) AS now",
      [`${Math.max(1, Math.round(waitMs))}ms`],
    );
    await executor.execute('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [name]);
    await executor.execute("SELECT set_config('lock_timeout', $1, true)", [
      typeof saved?.['previous'] === 'string' ? saved['previous'] : '0',
    ]);
    await executor.execute('RELEASE SAVEPOINT inboxkit_advisory_lock', []);
    return true;
  } catch (error) {
    // Back to before the savepoint: the transaction is usable again and lock_timeout is what it was.
    await executor.execute('ROLLBACK TO SAVEPOINT inboxkit_advisory_lock', []);
    await executor.execute('RELEASE SAVEPOINT inboxkit_advisory_lock', []);
    if ((error as { code?: unknown }).code === LOCK_NOT_AVAILABLE) return false;
    throw error;
  }
}
