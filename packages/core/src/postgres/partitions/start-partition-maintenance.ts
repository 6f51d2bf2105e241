// Partition maintenance on an in-process schedule, in every instance that calls it: the instances compete for
// the maintenance lock and one works at a time (maintain-inbox-partitions.ts).

import type { Logger } from '../../consumer-types.js';
import { startPruneSchedule, type Pruner } from '../../prune-inbox.js';
import { resolveInboxTableNames } from '../inbox-table-names.js';
import {
  maintainInboxPartitions,
  type PartitionMaintenanceOptions,
  type PartitionMaintenanceResult,
  type PartitionMaintenanceTarget,
} from './maintain-inbox-partitions.js';

/** Options of `startPartitionMaintenance`. */
export interface PartitionMaintenanceScheduleOptions extends Omit<PartitionMaintenanceOptions, 'dryRun'> {
  /** Time between runs. Default is 3,600,000 ms (an hour: a missed run or two still leaves days ahead). */
  readonly intervalMs?: number;
  /** Each wait is drawn uniformly in intervalMs × [1 − jitter, 1 + jitter]. Default is 0.2. */
  readonly jitter?: number;
  /** Called after every run. Errors thrown here are logged. */
  readonly onRun?: (result: PartitionMaintenanceResult) => void;
  /** Default is a silent logger; each day made or dropped is logged at info. */
  readonly logger?: Logger;
}

/**
 * Runs `maintainInboxPartitions` now and then every `intervalMs` (default an hour, ±20% jitter) until `stop()`.
 * Failures are logged and retried on the next tick; the timer does not keep the process alive.
 *
 * @example
 * const maintenance = startPartitionMaintenance({ db }, { dedupeWindowMs: 7 * 86_400_000, logger });
 * process.on('SIGTERM', () => void maintenance.stop());
 */
export function startPartitionMaintenance<DB>(
  target: PartitionMaintenanceTarget<DB>,
  options: PartitionMaintenanceScheduleOptions = {},
): Pruner<PartitionMaintenanceResult> {
  const { intervalMs, jitter, onRun, logger, ...maintenance } = options;
  const table = resolveInboxTableNames(maintenance).qualifiedTable;
  const run = (): Promise<PartitionMaintenanceResult> =>
    maintainInboxPartitions(target, {
      ...maintenance,
      onStep: (step) => {
        if (step.action !== 'kept') logger?.info({ table, ...step }, `inboxkit: partition ${step.day} ${step.action}`);
        maintenance.onStep?.(step);
      },
    });
  const schedule = startPruneSchedule(run, {
    what: 'partition maintenance',
    intervalMs: intervalMs ?? 3_600_000,
    ...(jitter !== undefined ? { jitter } : {}),
    ...(onRun !== undefined ? { onPrune: onRun } : {}),
    ...(logger !== undefined ? { logger } : {}),
  });
  // The first run now: days ahead exist from start-up on.
  schedule.runNow().catch((error: unknown) => logger?.warn({ err: error }, 'inboxkit: partition maintenance failed; retrying on the next tick'));
  return schedule;
}
