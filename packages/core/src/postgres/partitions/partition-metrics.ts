// Partition maintenance's metrics through @opentelemetry/api (no-op until the application registers an SDK or
// passes a MeterProvider), named as the consumer's are (consumer-metrics.ts, docs/operations.md).

import { metrics, type MeterProvider } from '@opentelemetry/api';
import type { PartitionStep } from './partition-step.js';

export const PARTITION_METRIC_NAMES = {
  /** Counter of days by `action`: created, dropped, kept (still inside a row's window), busy (lock timeout). */
  partitions: 'inboxkit.partitions',
  /** Counter of rows moved by `action`: created (in from the default partition), dropped (open rows out to it). */
  rowsMoved: 'inboxkit.partition_rows_moved',
} as const;

/** Counts one run's steps; every series carries the inbox `table` (schema-qualified). */
export function countPartitionSteps(table: string, steps: readonly PartitionStep[], provider?: MeterProvider): void {
  const meter = (provider ?? metrics.getMeterProvider()).getMeter('@inboxkit/core');
  const days = meter.createCounter(PARTITION_METRIC_NAMES.partitions, { description: 'Inbox day partitions by action' });
  const moved = meter.createCounter(PARTITION_METRIC_NAMES.rowsMoved, { description: 'Inbox rows moved between partitions' });
  for (const step of steps) {
    if (step.action === 'would-create' || step.action === 'would-drop') continue;
    days.add(1, { table, action: step.action });
    if ((step.action === 'created' || step.action === 'dropped') && step.movedRows > 0) moved.add(step.movedRows, { table, action: step.action });
  }
}
