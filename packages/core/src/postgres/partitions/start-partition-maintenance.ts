// Partition maintenance on an in-process schedule, in every instance that calls it: the instances compete for
// the maintenance lock and one works at a time (maintain-inbox-partitions.ts). It is given the run to repeat, so
// it knows no seam; ../../kysely/partition-maintenance.ts gives it `maintainInboxPartitions` over the target.

import type { Logger } from '../../consumer-types.js';
import { startPruneSchedule, type Pruner } from '../../prune-inbox.js';
import { resolveInboxTableNames } from '../inbox-table-names.js';
import type { PartitionMaintenanceOptions, PartitionMaintenanceResult } from './maintain-inbox-partitions.js';

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

/** `startPartitionMaintenance` with the run it repeats (`maintain`, given each run's options). */
export function startPartitionSchedule(
  maintain: (options: PartitionMaintenanceOptions) => Promise<PartitionMaintenanceResult>,
  options: PartitionMaintenanceScheduleOptions = {},
): Pruner<PartitionMaintenanceResult> {
  const { intervalMs, jitter, onRun, logger, ...maintenance } = options;
  const table = resolveInboxTableNames(maintenance).qualifiedTable;
  const run = (): Promise<PartitionMaintenanceResult> =>
    maintain({
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
