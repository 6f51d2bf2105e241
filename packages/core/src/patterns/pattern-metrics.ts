// The patterns' counters and the reconciliation gauge, through @opentelemetry/api like the consumer's: no-op
// until the application registers an SDK.

import { metrics, type Counter, type MeterProvider } from '@opentelemetry/api';

/**
 * Instrument names of the patterns, documented for dashboards (docs/patterns.md, docs/operations.md).
 *
 * @example
 * // Alert on open reconciliation differences:
 * const gauge = PATTERN_METRIC_NAMES.unreconciled; // 'inboxkit.reconciliation.unreconciled', by `sweeper`
 */
export const PATTERN_METRIC_NAMES = {
  /** Counter of updates a version guard refused (the event was not newer than the row), by `table`. */
  staleUpdates: 'inboxkit.patterns.stale_updates',
  /** Counter of natural-key inserts that found the key taken, by `table`: one intent under two message ids. */
  naturalKeyConflicts: 'inboxkit.patterns.natural_key_conflicts',
  /** Counter of state transitions a state machine refused (`transitionState`), by `table`: late or wrong events. */
  illegalTransitions: 'inboxkit.patterns.illegal_transitions',
  /** Counter of compare-and-set writes that found another version (`compareAndSet`), by `table`. */
  versionConflicts: 'inboxkit.patterns.version_conflicts',
  /** Counter of advisory-lock claims that gave up after their wait, by `lock` (the key's namespace). */
  advisoryLockBusy: 'inboxkit.patterns.advisory_lock_busy',
  /** Gauge of open reconciliation differences, by `sweeper`: alert when above 0. */
  unreconciled: 'inboxkit.reconciliation.unreconciled',
  /** Counter of differences found by a sweep, by `sweeper` and `kind` (missing-local, mismatch). */
  differencesFound: 'inboxkit.reconciliation.differences_found',
  /** Counter of differences repaired by a sweep, by `sweeper`. */
  differencesRepaired: 'inboxkit.reconciliation.differences_repaired',
} as const;

const counters = new WeakMap<MeterProvider, Map<string, Counter>>();

/** A counter of the patterns' meter on `provider` (default: the global provider), made once. */
export function patternCounter(name: string, description: string, provider?: MeterProvider): Counter {
  const p = provider ?? metrics.getMeterProvider();
  let byName = counters.get(p);
  if (byName === undefined) counters.set(p, (byName = new Map()));
  let counter = byName.get(name);
  if (counter === undefined)
    byName.set(name, (counter = p.getMeter('@inboxkit/core/patterns').createCounter(name, { description })));
  return counter;
}
