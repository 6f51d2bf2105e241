// Parking (DESIGN §6): a dead letter whose replay already failed is parked, so a bulk replay does not send the
// same bad message round the loop again and again. The inbox says so, whatever the broker kept of the replay
// marker: the row is `dead_lettered` and either a replay reopened it before (`replayCount` > 0: the replay ran
// and ended in the DLQ again) or the last replay audit line of the id is a dead letter (a replay refused before
// its claim: schema-invalid, undecodable, payload-mismatch). Bulk replays skip parked dead letters unless asked
// (`includeParked`, `--include-parked`); a replay that succeeds completes the row, which is then no longer parked.

import type { InboxRow } from '@inboxkit/core';

/** True for a replay audit outcome that ended in the DLQ (`replayed:dead-letter:…`, `refused-payload-mismatch:dead-letter:…`). */
export function isDeadLetterOutcome(outcome: string | undefined): boolean {
  return outcome !== undefined && /:dead-letter(:|$)/.test(outcome);
}

/**
 * True when `row` (`undefined` = no row, `null` = the inbox was not read) is parked: dead-lettered, and a
 * replay of it failed before — it reopened the row, or `lastReplayOutcome` (the id's last replay audit line)
 * is a dead letter. An unread inbox parks nothing.
 *
 * @example
 * const [row] = await store.findRows('orders', ['o-1']);
 * if (isParked(row)) console.log('a replay of o-1 failed before: fix it first');
 */
export function isParked(row: InboxRow | undefined | null, lastReplayOutcome?: string): row is InboxRow {
  if (row === undefined || row === null || row.status !== 'dead_lettered') return false;
  return row.replayCount > 0 || isDeadLetterOutcome(lastReplayOutcome);
}

/** Why a parked dead letter was left in the DLQ, for output. */
export function parkedDetail(row: InboxRow, lastReplayOutcome?: string): string {
  const how =
    row.replayCount > 0
      ? `a replay reopened it ${row.replayCount === 1 ? 'once' : `${row.replayCount} times`} and it was dead-lettered again (${row.deadLetterReason ?? 'no reason recorded'})`
      : `its last replay ended as ${lastReplayOutcome ?? 'a dead letter'}`;
  return `parked: ${how}; fix the cause, then replay it with --include-parked`;
}
