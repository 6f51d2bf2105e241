// Retention: deleting completed rows whose dedupe window passed, on demand (the CLI's `inboxkit prune`) or on
// an in-process schedule. Rows in any other state are never deleted by age (DESIGN §5).

import type { Logger } from './consumer-types.js';
import { silentLogger } from './silent-logger.js';
import type { InboxStore, PruneOptions, PruneResult } from './store.js';

/**
 * Deletes expired `completed` rows in batches of `batchSize` (default 5,000) under the store's prune lock (a
 * Postgres advisory lock: one runner at a time; a concurrent run returns `status: 'locked'`). `dryRun` counts
 * instead of deleting.
 *
 * @example
 * const { deleted } = await pruneInbox(store, { consumer: 'billing' });
 */
export function pruneInbox(store: InboxStore<unknown>, options: PruneOptions = {}): Promise<PruneResult> {
  return store.prune({ batchSize: 5_000, ...options });
}

/** Options of `startPruner`. */
export interface PrunerOptions extends Omit<PruneOptions, 'dryRun'> {
  /** Time between runs. Default is 60,000 ms. */
  readonly intervalMs?: number;
  /** Each wait is drawn uniformly in intervalMs × [1 − jitter, 1 + jitter], so replicas spread out. Default is 0.2. */
  readonly jitter?: number;
  /** Called after every run (for metrics). Errors thrown here are logged. */
  readonly onPrune?: (result: PruneResult) => void;
  /** Default is a silent logger. */
  readonly logger?: Logger;
}

/** A running in-process pruner (`R`: what a run resolves to). */
export interface Pruner<R = PruneResult> {
  /** Stops scheduling and waits for a run in progress. Safe to call twice. */
  stop(): Promise<void>;
  /** Runs once now (outside the schedule) and resolves with the result. */
  runNow(): Promise<R>;
}

/**
 * Prunes every `intervalMs` (default 60 s, with ±20% jitter) until `stop()`. Failures are logged and retried on
 * the next tick; the timer does not keep the process alive.
 *
 * @example
 * const pruner = startPruner(store, { logger });
 * process.on('SIGTERM', () => void pruner.stop());
 */
export function startPruner(store: InboxStore<unknown>, options: PrunerOptions = {}): Pruner {
  const { intervalMs, jitter, onPrune, logger, ...pruneOptions } = options;
  return startPruneSchedule(() => pruneInbox(store, pruneOptions), {
    what: 'prune',
    ...(intervalMs !== undefined ? { intervalMs } : {}),
    ...(jitter !== undefined ? { jitter } : {}),
    ...(onPrune !== undefined ? { onPrune } : {}),
    ...(logger !== undefined ? { logger } : {}),
  });
}

/** Options of `startPruneSchedule`: the schedule part of `PrunerOptions`, and a name for the log lines. */
export interface PruneScheduleOptions<R = PruneResult> extends Pick<PrunerOptions, 'intervalMs' | 'jitter' | 'logger'> {
  /** Names the runs in log lines (`inboxkit: <what> run`). Default is `prune`. */
  readonly what?: string;
  /** Called after every run (for metrics). Errors thrown here are logged. */
  readonly onPrune?: (result: R) => void;
}

/**
 * The schedule behind `startPruner`, for any prune function (the HTTP idempotency keys use it): runs
 * `prune` every `intervalMs` (default 60 s, ±20% jitter) until `stop()`, one run at a time; failures are logged
 * and retried on the next tick; the timer does not keep the process alive.
 *
 * @example
 * const pruner = startPruneSchedule(() => pruneSomething(db), { what: 'something prune', logger });
 */
export function startPruneSchedule<R extends object = PruneResult>(prune: () => Promise<R>, options: PruneScheduleOptions<R> = {}): Pruner<R> {
  const intervalMs = options.intervalMs ?? 60_000;
  const jitter = options.jitter ?? 0.2;
  if (!(intervalMs > 0)) throw new RangeError('intervalMs must be positive');
  if (!(jitter >= 0 && jitter < 1)) throw new RangeError('jitter must be in [0, 1)');
  const logger = options.logger ?? silentLogger;
  const what = options.what ?? 'prune';
  const onPrune = options.onPrune;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<R> | undefined;

  const run = (): Promise<R> => {
    running ??= prune()
      .then((result) => {
        logger.debug({ ...result }, `inboxkit: ${what} run`);
        try {
          onPrune?.(result);
        } catch (error) {
          logger.warn({ err: error }, 'inboxkit: onPrune threw; ignored');
        }
        return result;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };

  const schedule = (): void => {
    if (stopped) return;
    const wait = intervalMs * (1 - jitter + Math.random() * 2 * jitter);
    timer = setTimeout(() => {
      run()
        .catch((error: unknown) => logger.warn({ err: error }, `inboxkit: ${what} failed; retrying on the next tick`))
        .finally(schedule);
    }, wait);
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
