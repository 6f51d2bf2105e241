// The reconciliation sweeper, for effects whose downstream keeps no idempotency key (or keeps it shorter than
// our retries): on a schedule, list what the downstream did since a watermark, compare it with the local record,
// record every difference until it is resolved, optionally repair it, and expose the open ones as a gauge. It
// cannot prevent a double or orphan effect; it makes sure none goes unnoticed.

import { metrics, type MeterProvider } from '@opentelemetry/api';
import type { Logger } from '../consumer-types.js';
import { silentLogger } from '../silent-logger.js';
import { tryAdvisoryLock } from './advisory-lock.js';
import { patternCounter, PATTERN_METRIC_NAMES } from './pattern-metrics.js';
import { DEFAULT_RECONCILIATION_SCHEMA } from './reconciliation-schema.js';
import { sqlExecutorOf, type SqlExecutor, type SqlTransaction } from './sql-executor.js';
import { quoteIdentifier } from './sql-identifier.js';

/** One operation the downstream reports: its key (the local record's, e.g. a payment id) and when it happened. */
export interface RemoteOperation {
  readonly key: string;
  readonly at: Date;
}

/** Runs `work` in a transaction: a Kysely instance, or a function such as `(work) => db.transaction().execute(work)`. */
export type TransactionRunner<Tx> =
  | (<T>(work: (tx: Tx) => Promise<T>) => Promise<T>)
  | { transaction(): { execute<T>(work: (tx: Tx) => Promise<T>): Promise<T> } };

/** A difference between the downstream and the local record. */
export interface ReconciliationDifference<R extends RemoteOperation, L> {
  /** `missing-local`: the downstream did it, we have no record. `mismatch`: both have it, `compare` disagrees. */
  readonly kind: 'missing-local' | 'mismatch';
  readonly operation: R;
  readonly local: L | undefined;
  /** What `compare` said, for a mismatch. */
  readonly detail: string | undefined;
  /** True when an earlier sweep had recorded it already. */
  readonly known: boolean;
}

/** Configuration of `reconciliationSweeper`. */
export interface ReconciliationSweeperOptions<R extends RemoteOperation, L, Tx extends SqlTransaction> {
  /** Names the sweeper: its watermark, its differences, its lock and its gauge series. Never rename it. */
  readonly name: string;
  /** Opens the transactions the sweeper writes in (its lock, the comparison, repairs, the new watermark). */
  readonly db: TransactionRunner<Tx>;
  /**
   * Lists the downstream's operations that happened in [since, until): a provider's "list charges created
   * after" call, paged to the end. May be called again for an overlapping window: the sweeper deduplicates.
   */
  readonly listRemote: (window: { readonly since: Date; readonly until: Date }) => Promise<readonly R[]>;
  /** The local records of these operations, by key; a key absent from the map has none. Runs in the sweep's transaction. */
  readonly findLocal: (tx: Tx, operations: readonly R[]) => Promise<ReadonlyMap<string, L>>;
  /** Describes a disagreement between an operation and its local record (amounts differ …), or undefined. Default: none. */
  readonly compare?: (operation: R, local: L) => string | undefined;
  /**
   * Repairs a difference in the sweep's transaction (inside a savepoint): resolve it by returning normally,
   * leave it open by returning `false` or throwing. Default: none — differences are recorded and counted only.
   */
  readonly repair?: (tx: Tx, difference: ReconciliationDifference<R, L>) => Promise<boolean | void>;
  /** Schema of the sweeper's tables (`migrateReconciliation`). Default is `inboxkit`. */
  readonly schema?: string;
  /** Each window starts this long before the watermark, for operations the downstream lists late. Default is 300,000 ms. */
  readonly overlapMs?: number;
  /** Operations younger than this are left for the next sweep: their local commit may be in flight. Default is 60,000 ms. */
  readonly settleMs?: number;
  /** How far back the first sweep looks. Default is 86,400,000 ms (24 h). */
  readonly initialLookbackMs?: number;
  /** Open differences rechecked per sweep (a late local record resolves them). Default is 1,000. */
  readonly recheckLimit?: number;
  /** Default is a silent logger. */
  readonly logger?: Logger;
  /** Where the gauge and counters go. Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: MeterProvider;
}

/** What one sweep did. */
export interface ReconciliationReport<R extends RemoteOperation, L> {
  /** `locked`: another runner was sweeping; nothing was done. */
  readonly status: 'swept' | 'locked';
  readonly since: Date;
  readonly until: Date;
  /** Operations the downstream listed in the window. */
  readonly listed: number;
  /** Differences seen in this sweep (new and rechecked) that are still open. */
  readonly differences: readonly ReconciliationDifference<R, L>[];
  /** Differences `repair` resolved in this sweep. */
  readonly repaired: number;
  /** Earlier differences that now reconcile (their local record appeared). */
  readonly reconciled: number;
  /** Open differences after the sweep: the gauge's value. */
  readonly unreconciled: number;
}

/** A recorded, unresolved difference (`sweeper.openDifferences()`). */
export interface OpenDifference {
  readonly key: string;
  readonly kind: string;
  readonly detail: string | null;
  readonly operation: unknown;
  readonly firstFoundAt: Date;
  readonly lastSeenAt: Date;
}

/** A sweeper: sweep now, on a schedule (`startReconciliation`), or read what is open. */
export interface ReconciliationSweeper<R extends RemoteOperation, L> {
  readonly name: string;
  /** One sweep: list, compare, record, repair, advance the watermark. Rejects when the downstream or the database fails (the watermark stays). */
  sweep(): Promise<ReconciliationReport<R, L>>;
  /** The open differences, oldest first (at most `limit`, default 100). */
  openDifferences(limit?: number): Promise<OpenDifference[]>;
  /** Marks a difference resolved by hand (an operator refunded the orphan charge …). True if it was open. */
  resolve(key: string, resolution: string): Promise<boolean>;
}

/** What `findLocal` and `repair` need from a difference stored in JSON: its operation, `at` a Date again. */
function revive<R extends RemoteOperation>(stored: unknown): R {
  const op = stored as Record<string, unknown>;
  return { ...op, at: new Date(String(op['at'])) } as unknown as R;
}

function runIn<Tx, T>(db: TransactionRunner<Tx>, work: (tx: Tx) => Promise<T>): Promise<T> {
  return typeof db === 'function' ? db(work) : db.transaction().execute(work);
}

const gauges = new WeakMap<MeterProvider, Map<string, number>>();

/** Reports the last known open count of every sweeper on one gauge per meter provider. */
function unreconciledGauge(provider: MeterProvider): Map<string, number> {
  let values = gauges.get(provider);
  if (values === undefined) {
    const known = new Map<string, number>();
    values = known;
    gauges.set(provider, known);
    provider
      .getMeter('@inboxkit/core/patterns')
      .createObservableGauge(PATTERN_METRIC_NAMES.unreconciled, {
        description: 'Open reconciliation differences',
      })
      .addCallback((result) => {
        for (const [sweeper, value] of known) result.observe(value, { sweeper });
      });
  }
  return values;
}

/**
 * Builds a reconciliation sweeper (see `ReconciliationSweeperOptions`). Each `sweep()`:
 *
 * 1. reads the watermark and lists the downstream's operations in [watermark − overlapMs, now − settleMs) —
 *    outside any transaction, so a slow downstream holds no connection;
 * 2. in one transaction, under a transaction-scoped advisory lock on the name (a concurrent sweep of the same
 *    name returns `locked`): looks up the local records of those operations and of the open differences,
 *    records each difference (`missing-local`, `mismatch`), repairs it when `repair` is given, resolves those
 *    that now reconcile, and moves the watermark to the window's end;
 * 3. sets the `inboxkit.reconciliation.unreconciled` gauge to the open differences left.
 *
 * A difference stays open (and counted) until a repair, a later sweep that finds its local record, or
 * `resolve()`: the watermark moving on never hides one. Needs the tables of `migrateReconciliation`.
 *
 * @example
 * const sweeper = reconciliationSweeper({
 *   name: 'provider-charges',
 *   db,
 *   listRemote: ({ since, until }) => provider.listCharges({ since, until }), // [{ key: paymentId, at, … }]
 *   findLocal: async (tx, charges) => new Map((await tx.selectFrom('payments').selectAll()
 *     .where('payment_id', 'in', charges.map((c) => c.key)).execute()).map((p) => [p.payment_id, p])),
 * });
 * const schedule = startReconciliation(sweeper, { intervalMs: 300_000 });
 */
export function reconciliationSweeper<R extends RemoteOperation, L, Tx extends SqlTransaction>(
  options: ReconciliationSweeperOptions<R, L, Tx>,
): ReconciliationSweeper<R, L> {
  if (typeof options.name !== 'string' || options.name.length === 0)
    throw new TypeError('reconciliationSweeper: name is required');
  const schema = quoteIdentifier(options.schema ?? DEFAULT_RECONCILIATION_SCHEMA);
  const watermarks = `${schema}.reconciliation_watermarks`;
  const differencesTable = `${schema}.reconciliation_differences`;
  const overlapMs = options.overlapMs ?? 300_000;
  const settleMs = options.settleMs ?? 60_000;
  const lookbackMs = options.initialLookbackMs ?? 86_400_000;
  const recheckLimit = options.recheckLimit ?? 1_000;
  for (const [label, value] of [
    ['overlapMs', overlapMs],
    ['settleMs', settleMs],
    ['initialLookbackMs', lookbackMs],
    ['recheckLimit', recheckLimit],
  ] as const) {
    if (!Number.isFinite(value) || value < 0)
      throw new RangeError(`reconciliationSweeper: ${label} must be 0 or more, got ${String(value)}`);
  }
  const logger = options.logger ?? silentLogger;
  const provider = options.meterProvider ?? metrics.getMeterProvider();
  const gauge = unreconciledGauge(provider);
  const name = options.name;
  const attributes = { sweeper: name };

  const countOpen = async (executor: SqlExecutor): Promise<number> => {
    const [row] = await executor.execute(
      `SELECT count(*)::int AS n FROM ${differencesTable} WHERE sweeper = $1 AND resolved_at IS NULL`,
      [name],
    );
    return Number(row?.['n'] ?? 0);
  };

  const sweep = async (): Promise<ReconciliationReport<R, L>> => {
    const now = Date.now();
    const stored = await runIn(options.db, async (tx) => {
      const [row] = await sqlExecutorOf(tx).execute(
        `SELECT watermark FROM ${watermarks} WHERE sweeper = $1`,
        [name],
      );
      return row?.['watermark'] === undefined ? undefined : new Date(row['watermark'] as string | Date);
    });
    const until = new Date(now - settleMs);
    const since = new Date((stored?.getTime() ?? now - lookbackMs) - overlapMs);
    const listed = since < until ? await options.listRemote({ since, until }) : [];
    // The downstream may return more than asked: keep the window, one operation per key.
    const byKey = new Map<string, R>();
    for (const op of listed) if (op.at >= since && op.at < until) byKey.set(op.key, op);

    const report = await runIn(options.db, async (tx): Promise<ReconciliationReport<R, L>> => {
      const executor = sqlExecutorOf(tx);
      const lock = await tryAdvisoryLock(executor, {
        key: ['inboxkit-reconciliation', name],
        waitMs: 0,
        ...(options.meterProvider ? { meterProvider: options.meterProvider } : {}),
      });
      if (!lock.acquired)
        return {
          status: 'locked',
          since,
          until,
          listed: listed.length,
          differences: [],
          repaired: 0,
          reconciled: 0,
          unreconciled: gauge.get(name) ?? 0,
        };
      const open = await executor.execute(
        `SELECT operation_key, operation FROM ${differencesTable} WHERE sweeper = $1 AND resolved_at IS NULL ORDER BY first_found_at LIMIT $2`,
        [name, recheckLimit],
      );
      const known = new Set<string>();
      for (const row of open) {
        const key = String(row['operation_key']);
        known.add(key);
        if (!byKey.has(key)) byKey.set(key, revive<R>(row['operation']));
      }
      const operations = [...byKey.values()];
      const locals = operations.length > 0 ? await options.findLocal(tx, operations) : new Map<string, L>();
      const differences: ReconciliationDifference<R, L>[] = [];
      let repaired = 0;
      let reconciled = 0;
      for (const operation of operations) {
        const local = locals.get(operation.key);
        const detail = local === undefined ? undefined : options.compare?.(operation, local);
        if (local !== undefined && detail === undefined) {
          if (known.has(operation.key)) {
            await resolveRow(executor, operation.key, 'reconciled');
            reconciled += 1;
          }
          continue;
        }
        const difference: ReconciliationDifference<R, L> = {
          kind: local === undefined ? 'missing-local' : 'mismatch',
          operation,
          local,
          detail,
          known: known.has(operation.key),
        };
        // A difference resolved earlier (by hand, say) stays resolved when the overlap lists its operation again.
        const recorded = await executor.execute(
          `INSERT INTO ${differencesTable} AS d (sweeper, operation_key, kind, detail, operation, operation_at) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (sweeper, operation_key) DO UPDATE SET kind = EXCLUDED.kind, detail = EXCLUDED.detail, operation = EXCLUDED.operation,
             last_seen_at = now()
           WHERE d.resolved_at IS NULL RETURNING 1 AS open`,
          [name, operation.key, difference.kind, detail ?? null, JSON.stringify(operation), operation.at],
        );
        if (recorded.length === 0) continue;
        if (!difference.known)
          patternCounter(
            PATTERN_METRIC_NAMES.differencesFound,
            'Reconciliation differences found',
            options.meterProvider,
          ).add(1, { ...attributes, kind: difference.kind });
        if (options.repair !== undefined && (await repairInSavepoint(executor, tx, difference))) {
          await resolveRow(executor, operation.key, 'repaired');
          repaired += 1;
          patternCounter(
            PATTERN_METRIC_NAMES.differencesRepaired,
            'Reconciliation differences repaired',
            options.meterProvider,
          ).add(1, attributes);
          continue;
        }
        differences.push(difference);
      }
      await executor.execute(
        `INSERT INTO ${watermarks} AS w (sweeper, watermark, swept_at) VALUES ($1, $2, now())
         ON CONFLICT (sweeper) DO UPDATE SET watermark = GREATEST(w.watermark, EXCLUDED.watermark), swept_at = now()`,
        [name, until],
      );
      return {
        status: 'swept',
        since,
        until,
        listed: listed.length,
        differences,
        repaired,
        reconciled,
        unreconciled: await countOpen(executor),
      };
    });
    if (report.status === 'swept') gauge.set(name, report.unreconciled);
    if (report.differences.length > 0) {
      logger.warn(
        {
          sweeper: name,
          unreconciled: report.unreconciled,
          keys: report.differences.slice(0, 20).map((d) => `${d.kind}:${d.operation.key}`),
        },
        'inboxkit: reconciliation found differences',
      );
    }
    return report;
  };

  const resolveRow = (executor: SqlExecutor, key: string, resolution: string) =>
    executor.execute(
      `UPDATE ${differencesTable} SET resolved_at = now(), resolution = $3 WHERE sweeper = $1 AND operation_key = $2 AND resolved_at IS NULL`,
      [name, key, resolution],
    );

  const repairInSavepoint = async (
    executor: SqlExecutor,
    tx: Tx,
    difference: ReconciliationDifference<R, L>,
  ): Promise<boolean> => {
    await executor.execute('SAVEPOINT inboxkit_reconciliation_repair', []);
    try {
      const done = await options.repair!(tx, difference);
      await executor.execute('RELEASE SAVEPOINT inboxkit_reconciliation_repair', []);
      return done !== false;
    } catch (error) {
      await executor.execute('ROLLBACK TO SAVEPOINT inboxkit_reconciliation_repair', []);
      await executor.execute('RELEASE SAVEPOINT inboxkit_reconciliation_repair', []);
      logger.warn(
        { sweeper: name, key: difference.operation.key, err: error },
        'inboxkit: reconciliation repair failed; the difference stays open',
      );
      return false;
    }
  };

  return {
    name,
    sweep,
    openDifferences: (limit = 100) =>
      runIn(options.db, async (tx) =>
        (
          await sqlExecutorOf(tx).execute(
            `SELECT operation_key, kind, detail, operation, first_found_at, last_seen_at FROM ${differencesTable}
             WHERE sweeper = $1 AND resolved_at IS NULL ORDER BY first_found_at LIMIT $2`,
            [name, limit],
          )
        ).map((row) => ({
          key: String(row['operation_key']),
          kind: String(row['kind']),
          detail: typeof row['detail'] === 'string' ? row['detail'] : null,
          operation: row['operation'],
          firstFoundAt: new Date(row['first_found_at'] as string | Date),
          lastSeenAt: new Date(row['last_seen_at'] as string | Date),
        })),
      ),
    resolve: (key, resolution) =>
      runIn(options.db, async (tx) => {
        const executor = sqlExecutorOf(tx);
        const rows = await executor.execute(
          `UPDATE ${differencesTable} SET resolved_at = now(), resolution = $3 WHERE sweeper = $1 AND operation_key = $2 AND resolved_at IS NULL RETURNING 1 AS resolved`,
          [name, key, resolution],
        );
        gauge.set(name, await countOpen(executor));
        return rows.length > 0;
      }),
  };
}

/** Options of `startReconciliation`. */
export interface ReconciliationScheduleOptions<R extends RemoteOperation, L> {
  /** Time between sweeps. Default is 300,000 ms (5 minutes). */
  readonly intervalMs?: number;
  /** Each wait is drawn in intervalMs × [1 − jitter, 1 + jitter]. Default is 0.2. */
  readonly jitter?: number;
  /** Called after every sweep (for alerts, logs). Errors thrown here are logged. */
  readonly onReport?: (report: ReconciliationReport<R, L>) => void;
  /** Default is a silent logger. */
  readonly logger?: Logger;
}

/** A running schedule of sweeps. */
export interface ReconciliationSchedule<R extends RemoteOperation, L> {
  /** Stops scheduling and waits for a sweep in progress. Safe to call twice. */
  stop(): Promise<void>;
  /** Sweeps now (outside the schedule; joins a sweep in progress). */
  runNow(): Promise<ReconciliationReport<R, L>>;
}

/**
 * Sweeps every `intervalMs` (default 5 minutes, ±20% jitter) until `stop()`, one sweep at a time in this process
 * (and one per name across processes, by the sweeper's lock). A failed sweep is logged and retried on the next
 * tick; the watermark only moves on success. The timer does not keep the process alive.
 *
 * @example
 * const schedule = startReconciliation(sweeper, { intervalMs: 60_000, logger });
 * process.once('SIGTERM', () => void schedule.stop());
 */
export function startReconciliation<R extends RemoteOperation, L>(
  sweeper: ReconciliationSweeper<R, L>,
  options: ReconciliationScheduleOptions<R, L> = {},
): ReconciliationSchedule<R, L> {
  const intervalMs = options.intervalMs ?? 300_000;
  const jitter = options.jitter ?? 0.2;
  if (!(intervalMs > 0)) throw new RangeError('intervalMs must be positive');
  if (!(jitter >= 0 && jitter < 1)) throw new RangeError('jitter must be in [0, 1)');
  const logger = options.logger ?? silentLogger;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<ReconciliationReport<R, L>> | undefined;
  const run = (): Promise<ReconciliationReport<R, L>> =>
    (running ??= sweeper
      .sweep()
      .then((report) => {
        try {
          options.onReport?.(report);
        } catch (error) {
          logger.warn({ err: error }, 'inboxkit: onReport threw; ignored');
        }
        return report;
      })
      .finally(() => (running = undefined)));
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(
      () => {
        run()
          .catch((error: unknown) =>
            logger.warn(
              { sweeper: sweeper.name, err: error },
              'inboxkit: reconciliation sweep failed; retrying on the next tick',
            ),
          )
          .finally(schedule);
      },
      intervalMs * (1 - jitter + Math.random() * 2 * jitter),
    );
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
    runNow: run,
  };
}
