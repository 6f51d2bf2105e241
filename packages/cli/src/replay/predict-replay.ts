// What the inbox will do with a replayed message, read from its row before the replay (DESIGN §6). The same
// function feeds `--dry-run`, `dlq list` and the summary of a real run, so the prediction and the run agree.

import type { InboxRowState } from '../inbox/inbox-lookup.js';

/**
 * - `process`: no inbox row, the message is processed as new.
 * - `reopen`: the row is `dead_lettered`; the replay reopens it once, processes it and audits the replay.
 * - `skip-duplicate`: the row is `completed`; the consumer skips the replay as a duplicate.
 * - `in-flight`: the row is `processing`; the replay waits for that delivery, then is skipped or takes over.
 * - `retry-pending`: the row is `failed` and still being retried; the replay counts as its next attempt.
 * - `unknown`: the inbox was not read (no database given, or the dead letter has no id or consumer).
 */
export type ReplayPrediction =
  'process' | 'reopen' | 'skip-duplicate' | 'in-flight' | 'retry-pending' | 'unknown';

/** Every prediction, in display order. */
export const REPLAY_PREDICTIONS: readonly ReplayPrediction[] = [
  'reopen',
  'process',
  'skip-duplicate',
  'in-flight',
  'retry-pending',
  'unknown',
];

/** The prediction for a row (`undefined` = no row; `null` = the inbox was not read). */
export function predictReplay(row: InboxRowState | undefined | null): ReplayPrediction {
  if (row === null) return 'unknown';
  if (row === undefined) return 'process';
  switch (row.status) {
    case 'completed':
      return 'skip-duplicate';
    case 'dead_lettered':
      return 'reopen';
    case 'processing':
      return 'in-flight';
    case 'failed':
      return 'retry-pending';
  }
}

/** One line a person reads: what will happen and why. */
export function describePrediction(prediction: ReplayPrediction): string {
  switch (prediction) {
    case 'process':
      return 'no inbox row: processed as a new message';
    case 'reopen':
      return 'dead-lettered: reopened once and processed (audited)';
    case 'skip-duplicate':
      return 'completed: skipped as a duplicate';
    case 'in-flight':
      return 'processing: waits for the current delivery, then skipped or taken over';
    case 'retry-pending':
      return 'failed: still being retried; the replay is its next attempt';
    case 'unknown':
      return 'inbox not read';
  }
}
