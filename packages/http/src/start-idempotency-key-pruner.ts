// startIdempotencyKeyPruner(): the inbox's in-process pruner for idempotency keys. It runs on core's
// startPruneSchedule, the schedule behind startPruner (interval ± jitter, an unref'd timer, failures logged and
// retried on the next tick), and returns core's `Pruner`, so an application stops both the same way.

import { startPruneSchedule, type Pruner, type PrunerOptions } from '@inboxkit/core';
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
  const { intervalMs, jitter, onPrune, logger, ...pruneOptions } = options;
  return startPruneSchedule(() => pruneIdempotencyKeys(db, pruneOptions), {
    what: 'idempotency-key prune',
    ...(intervalMs !== undefined ? { intervalMs } : {}),
    ...(jitter !== undefined ? { jitter } : {}),
    ...(onPrune !== undefined ? { onPrune } : {}),
    ...(logger !== undefined ? { logger } : {}),
  });
}
