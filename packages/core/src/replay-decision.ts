// What an explicit DLQ replay of one message would do, read from its inbox row: the answer behind the CLI's
// `inboxkit dlq replay --dry-run`. It mirrors the claim's rules; it changes nothing.

import type { InboxRow } from './store.js';

/**
 * - `reopen`: the row is dead-lettered and this replay id is new: processed once, attempts reset, audited;
 * - `skip-completed`: already applied: answered `duplicate` (`replay-of-completed`);
 * - `skip-already-replayed`: dead-lettered again under this same replay id: dead-lettered again;
 * - `skip-retired`: an operator discarded or archived it: answered `duplicate` (`discarded`/`archived`), never run;
 * - `payload-mismatch`: the replayed body differs from the one recorded: dead-lettered, not processed;
 * - `in-progress`: a retry is pending or an attempt is running: handled as an ordinary redelivery;
 * - `no-row`: processed as a new message (or, if older than the dedupe window, by `latePolicy`).
 */
export type ReplayDecision =
  | 'reopen'
  | 'skip-completed'
  | 'skip-already-replayed'
  | 'skip-retired'
  | 'payload-mismatch'
  | 'in-progress'
  | 'no-row';

/**
 * Predicts a replay from the message's row (`undefined` when it has none). Pass the replayed payload's
 * `fingerprintPayload(...)` to check it against the recorded one.
 *
 * @example
 * const [row] = await store.findRows('billing', [id]);
 * replayDecision(row, 'replay-2024-06-01'); // 'reopen'
 */
export function replayDecision(row: InboxRow | undefined, replayId: string, fingerprint?: string): ReplayDecision {
  if (row === undefined) return 'no-row';
  if (fingerprint !== undefined && row.fingerprint !== null && row.fingerprint !== fingerprint) return 'payload-mismatch';
  switch (row.status) {
    case 'completed':
      return 'skip-completed';
    case 'dead_lettered':
      return row.lastReplayId === replayId ? 'skip-already-replayed' : 'reopen';
    case 'discarded':
    case 'archived':
      return 'skip-retired';
    default:
      return 'in-progress';
  }
}
