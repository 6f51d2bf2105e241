// What the inbox will do with a replayed message, read from its row before the replay (DESIGN §6). The
// decision itself is core's `replayDecision` — the same rules as the claim — so a dry run cannot disagree
// with the consumer; this file only names the outcomes for operators. The same function feeds `--dry-run`,
// `dlq list` and the summary of a real run.

import { replayDecision } from '@inboxkit/core';
import type { InboxRow } from '@inboxkit/core';

/**
 * - `reopen`: the row is `dead_lettered`; the replay reopens it once, processes it and audits the replay.
 * - `process`: no inbox row; the message is processed as new.
 * - `skip-duplicate`: the row is `completed` (or an earlier copy in the same run applies it); skipped.
 * - `in-flight`: the row is `processing`; the replay waits for that delivery, then is skipped or takes over.
 * - `retry-pending`: the row is `failed` and still being retried; the replay counts as its next attempt.
 * - `payload-mismatch`: the body differs from the one the id was applied with; dead-lettered again.
 * - `already-replayed`: dead-lettered again under this very replay id; dead-lettered again.
 * - `skip-retired`: an operator discarded or archived it; acked as a duplicate, never run.
 * - `unknown`: the inbox was not read (no database given, or the dead letter has no id or consumer).
 */
export type ReplayPrediction =
  | 'process'
  | 'reopen'
  | 'skip-duplicate'
  | 'in-flight'
  | 'retry-pending'
  | 'payload-mismatch'
  | 'already-replayed'
  | 'skip-retired'
  | 'unknown';

/** Every prediction, in display order. */
export const REPLAY_PREDICTIONS: readonly ReplayPrediction[] = [
  'reopen',
  'process',
  'skip-duplicate',
  'in-flight',
  'retry-pending',
  'payload-mismatch',
  'already-replayed',
  'skip-retired',
  'unknown',
];

/**
 * The prediction for a row (`undefined` = no row; `null` = the inbox was not read), replayed under
 * `replayId`. Give `fingerprint` (core's `fingerprintPayload` of the replayed payload) to detect a
 * payload mismatch.
 */
export function predictReplay(
  row: InboxRow | undefined | null,
  replayId: string,
  fingerprint?: string,
): ReplayPrediction {
  if (row === null) return 'unknown';
  switch (replayDecision(row, replayId, fingerprint)) {
    case 'no-row':
      return 'process';
    case 'reopen':
      return 'reopen';
    case 'skip-completed':
      return 'skip-duplicate';
    case 'skip-already-replayed':
      return 'already-replayed';
    case 'skip-retired':
      return 'skip-retired';
    case 'payload-mismatch':
      return 'payload-mismatch';
    case 'in-progress':
      return row?.status === 'failed' ? 'retry-pending' : 'in-flight';
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
    case 'payload-mismatch':
      return 'applied with another body: dead-lettered again as payload-mismatch';
    case 'already-replayed':
      return 'dead-lettered again under this replay id: dead-lettered again';
    case 'skip-retired':
      return 'discarded or archived by an operator: skipped as a duplicate, never run';
    case 'unknown':
      return 'inbox not read';
  }
}
