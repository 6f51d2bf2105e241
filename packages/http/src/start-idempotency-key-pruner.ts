// startIdempotencyKeyPruner(): the inbox's in-process pruner (core's startPruner) for idempotency keys. Core's
// pruner takes an InboxStore and knows nothing of HTTP, so this one has the same options, the same schedule
// (interval ± jitter, an unref'd timer, failures logged and retried on the next tick) and returns core's
// `Pruner`, so an application stops both the same way.

import { silentLogger, type Pruner, type PrunerOptions, type PruneResult } from '@inboxkit/core';
import type { Kysely } from 'kysely';
import { pruneIdempotencyKeys, type PruneIdempotencyKeysOptions } from './prune-idempotency-keys.js';

/** Options of `startIdempotencyKeyPruner`: core's `PrunerOptions` (without `consumer`) plus where the keys live. */
export interface IdempotencyKeyPrunerOptions
  extends Omit<PrunerOptions, 'consumer'>, Omit<PruneIdempotencyKeysOptions, 'dryRun'> {}

/**
 * Prunes expired idempotency keys every `intervalMs` (default 60 s, with ±20% jitter) until `stop()`, like
 * core's `startPruner` does for the inbox. Failures are logged and retried on the next tick; the timer does not
 * keep the process alive. Several replicas may run it at once (the deletes skip each other's locked rows).
 *
 * @example
 * const inboxPruner = startPruner(store, { logger });
 * const keyPruner = startIdempotencyKeyPruner(db, { logger });
 * process.on('SIGTERM', () => void Promise.all([inboxPruner.stop(), keyPruner.stop()]));
 */
export function startIdempotencyKeyPruner<DB>(
  db: Kysely<DB>,
  options: IdempotencyKeyPrunerOptions = {},
): Pruner {
  const intervalMs = options.intervalMs ?? 60_000;
  const jitter = options.jitter ?? 0.2;
  if (!(intervalMs > 0)) throw new RangeError('intervalMs must be positive');
  if (!(jitter >= 0 && jitter < 1)) throw new RangeError('jitter must be in [0, 1)');
  const logger = options.logger ?? silentLogger;
  const { intervalMs: _i, jitter: _j, onPrune, logger: _l, ...pruneOptions } = options;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<PruneResult> | undefined;

  const run = (): Promise<PruneResult> => {
    running ??= pruneIdempotencyKeys(db, pruneOptions)
      .then((result) => {
        logger.debug({ ...result }, 'inboxkit: idempotency-key prune run');
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
        .catch((error: unknown) =>
          logger.warn({ err: error }, 'inboxkit: idempotency-key prune failed; retrying on the next tick'),
        )
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
