// Which dead letters a `dlq list` or `dlq replay` run selects. Entries outside the filter are left in the
// DLQ untouched (released).

import type { DeadLetterRecord } from '@inboxkit/core';

import { recordedConsumer } from './recorded-consumer.js';

/** Selects dead letters; every given criterion must match. An empty filter selects everything. */
export interface DeadLetterFilter {
  /** Only dead letters of this consumer (`x-inboxkit-consumer`). */
  readonly consumer?: string | undefined;
  /** Only these reasons (`max-attempts`, `permanent-error` …). */
  readonly reasons?: readonly string[] | undefined;
  /** Only dead letters dead-lettered at or after this time. */
  readonly since?: Date | undefined;
  /** Only these message ids. */
  readonly ids?: readonly string[] | undefined;
}

/** True when the filter restricts anything. */
export function isFilterActive(filter: DeadLetterFilter): boolean {
  return (
    filter.consumer !== undefined ||
    (filter.reasons !== undefined && filter.reasons.length > 0) ||
    filter.since !== undefined ||
    (filter.ids !== undefined && filter.ids.length > 0)
  );
}

/**
 * Whether a dead letter (its id and its parsed headers, `undefined` when they were not written by inboxkit)
 * matches. A dead letter without inboxkit headers (a broker's own redrive) has no reason or time, so it
 * matches no `reasons` or `since` criterion; it is attributed to `consumer`, so that criterion passes (so does one a reader marked `unknown`).
 */
export function matchesFilter(
  id: string | undefined,
  record: DeadLetterRecord | undefined,
  filter: DeadLetterFilter,
): boolean {
  if (filter.ids !== undefined && filter.ids.length > 0 && (id === undefined || !filter.ids.includes(id))) {
    return false;
  }
  const consumer = recordedConsumer(record);
  if (filter.consumer !== undefined && consumer !== undefined && consumer !== filter.consumer) return false;
  if (filter.reasons !== undefined && filter.reasons.length > 0) {
    if (record === undefined || !filter.reasons.includes(record.reason)) return false;
  }
  if (filter.since !== undefined) {
    if (record === undefined || record.deadLetteredAt.getTime() < filter.since.getTime()) return false;
  }
  return true;
}
