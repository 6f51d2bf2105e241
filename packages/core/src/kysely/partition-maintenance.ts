// The public partition maintenance functions: the target (`{ db }`, the application's Kysely, or `{ seam }`)
// resolved to a seam here, beside the Kysely seam, so that ../postgres/partitions takes a seam and never imports
// ../kysely (docs/core.md, "Seams").

import type { Kysely } from 'kysely';
import type { Pruner } from '../prune-inbox.js';
import {
  maintainPartitionsOverSeam,
  type PartitionMaintenanceOptions,
  type PartitionMaintenanceResult,
} from '../postgres/partitions/maintain-inbox-partitions.js';
import {
  startPartitionSchedule,
  type PartitionMaintenanceScheduleOptions,
} from '../postgres/partitions/start-partition-maintenance.js';
import type { SqlSeam } from '../postgres/sql-seam.js';
import { kyselySeam } from './kysely-seam.js';

/** Where the partitioned inbox is: the application's Kysely instance, or any SQL library's seam. */
export type PartitionMaintenanceTarget<DB = unknown> =
  { readonly db: Kysely<DB> } | { readonly seam: SqlSeam<unknown> };

/**
 * Makes the partitions of the days from the start of the dedupe window to `aheadDays` ahead, and drops the
 * days wholly older than the window (`dedupeWindowMs`): only when no completed row in them is still inside its
 * own window; rows still `processing`, `failed` or `dead_lettered` are moved to the default partition, where
 * their redeliveries find them. Run it at least daily (`startPartitionMaintenance`, or `inboxkit partitions`
 * from cron); `inboxkit doctor` warns when fewer than a day ahead exist. Rejects with a `ConfigurationError`
 * when the inbox is not partitioned, and a `StoreUnavailableError` when the database fails.
 *
 * @example
 * const result = await maintainInboxPartitions({ db }, { aheadDays: 3, dedupeWindowMs: 7 * 86_400_000 });
 * for (const step of result.steps) console.log(step.action, step.day);
 */
export async function maintainInboxPartitions<DB>(
  target: PartitionMaintenanceTarget<DB>,
  options: PartitionMaintenanceOptions = {},
): Promise<PartitionMaintenanceResult> {
  return maintainPartitionsOverSeam('seam' in target ? target.seam : kyselySeam(target.db), options);
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
  return startPartitionSchedule((run) => maintainInboxPartitions(target, run), options);
}
