// Message mode with `keyConcurrency` > 1: up to that many records of one partition run at once, at most one per
// key, dispatched in offset order. The committable offset only follows the unbroken run of finished records.

import type { Logger } from '@inboxkit/core';
import type { KafkaDelivery } from './kafka-settlement.js';

/** What `runKeyConcurrent` needs from the batch processor. */
export interface KeyConcurrentRun {
  /** The most records in flight at once. */
  readonly limit: number;
  /** True when nothing more may be dispatched (stopping, a rebalance, a redelivery already asked for). */
  readonly mustYield: () => boolean;
  /** A record settled alone, in order: only once everything before it finished (a skipped tombstone). */
  readonly alone: (d: KafkaDelivery) => boolean;
  /** Runs and settles one record; its verdict is then in `d.again`. */
  readonly settle: (d: KafkaDelivery) => Promise<void>;
  /** Everything up to and including `d` is done: commit up to it. */
  readonly done: (d: KafkaDelivery) => void;
  /** Seek the partition back to `d` (after `d.again`). */
  readonly redeliver: (d: KafkaDelivery) => void;
  readonly logger: Logger;
}

/**
 * Runs `deliveries` (the rest of a batch, past the careful records): a record whose key is busy waits, and so
 * does everything behind it. At the first record that is not done nothing more is dispatched, the records in
 * flight finish, and the partition seeks back to the earliest record that is not done.
 */
export async function runKeyConcurrent(
  deliveries: readonly KafkaDelivery[],
  run: KeyConcurrentRun,
): Promise<void> {
  const finished = new Array<boolean>(deliveries.length).fill(false);
  const busyKeys = new Set<string>();
  const inFlight = new Set<Promise<void>>();
  let next = 0;
  let watermark = 0;
  let redeliverAt: number | undefined;
  const settled = (index: number): void => {
    if (deliveries[index]!.again === undefined) finished[index] = true;
    else if (redeliverAt === undefined || index < redeliverAt) redeliverAt = index;
  };
  for (;;) {
    while (
      next < deliveries.length &&
      inFlight.size < run.limit &&
      redeliverAt === undefined &&
      !run.mustYield()
    ) {
      const d = deliveries[next]!;
      if (run.alone(d)) {
        if (inFlight.size > 0 || watermark < next) break;
        await run.settle(d);
        settled(next);
        if (redeliverAt !== undefined) break;
        next += 1;
        watermark = next;
        run.done(d);
        continue;
      }
      const key = d.record.key === null ? undefined : d.record.key.toString('latin1');
      if (key !== undefined && busyKeys.has(key)) break;
      const index = next;
      next += 1;
      if (key !== undefined) busyKeys.add(key);
      const tracked = run
        .settle(d)
        .catch((error: unknown) => {
          // settle() never rejects by contract; were it to, the record comes back.
          run.logger.error(
            { err: error, offset: d.record.offset },
            'inboxkit: settling a record failed unexpectedly',
          );
        })
        .finally(() => {
          if (key !== undefined) busyKeys.delete(key);
          settled(index);
          inFlight.delete(tracked);
        });
      inFlight.add(tracked);
    }
    if (inFlight.size === 0) break;
    await Promise.race(inFlight);
    const before = watermark;
    while (watermark < next && finished[watermark]) watermark += 1;
    if (watermark > before) run.done(deliveries[watermark - 1]!);
  }
  if (redeliverAt !== undefined) run.redeliver(deliveries[redeliverAt]!);
}
