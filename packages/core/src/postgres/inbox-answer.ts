// What the inbox's functions answer (inbox-sql.ts), read back: a claim's answer as the store's result, a
// failure's record, a row as json (rowJson), and the SQLSTATEs that make a claim `busy`.

import type { BatchRun, BusyReason, ClaimedDelivery, ClaimedFrom, ClaimRequest, FailureWrite, InboxRow, InboxRowState, UnclaimedResult } from '../store.js';
import { sqlState, type SqlRow } from './sql-seam.js';

/** A claim's answer for one id. */
export type ClaimAnswer =
  | { readonly kind: 'claimed'; readonly attempt: number; readonly from: ClaimedFrom }
  | { readonly kind: 'duplicate' }
  /** Dead-lettered by the claim itself: the attempt would have exceeded max attempts. */
  | { readonly kind: 'exhausted'; readonly row: InboxRowState }
  | { readonly kind: 'not-claimed'; readonly row: InboxRowState }
  /** Neither taken nor seen (the row went away meanwhile): retry. */
  | { readonly kind: 'contended' };

const DUPLICATE = { kind: 'duplicate' } as const;
const CONTENDED = { kind: 'contended' } as const;
const BUSY_TIMEOUT = { kind: 'busy', reason: 'lock-timeout' } as const;
/** A claim that lost a race, or a row that went away meanwhile: retry. */
export const BUSY_CONTENDED = { kind: 'busy', reason: 'contended' } as const;

/** Reads `c<attempt> <from>`, `d`, `x<row>`, `s<row>` or NULL. */
export function claimAnswer(answer: unknown): ClaimAnswer {
  if (typeof answer !== 'string' || answer.length === 0) return CONTENDED;
  if (answer[0] === 'd') return DUPLICATE;
  if (answer[0] === 'c') {
    const space = answer.indexOf(' ');
    return { kind: 'claimed', attempt: Number(answer.slice(1, space)), from: answer.slice(space + 1) as ClaimedFrom };
  }
  return { kind: answer[0] === 'x' ? 'exhausted' : 'not-claimed', row: rowState(answer.slice(1)) };
}

const TIMESTAMPS: ReadonlySet<string> = new Set([
  'lockedUntil', 'availableAt', 'receivedAt', 'messageTimestamp', 'expiresAt', 'completedAt', 'deadLetteredAt',
  'firstFailureAt', 'lastFailureAt',
]);

/** A row with its waits, from its json (as text, or as the driver parsed it). */
export function rowState(json: unknown): InboxRowState {
  const revive = (key: string, value: unknown): unknown => (TIMESTAMPS.has(key) && typeof value === 'number' ? new Date(value) : value);
  return (typeof json === 'string' ? JSON.parse(json, revive) : JSON.parse(JSON.stringify(json), revive)) as InboxRowState;
}

/** A row, from its json. */
export function row(json: unknown): InboxRow {
  const { availableInMs: _available, leaseRemainingMs: _lease, ...fields } = rowState(json);
  return fields;
}

export function claimedOf(request: ClaimRequest, answer: Extract<ClaimAnswer, { kind: 'claimed' }>): ClaimedDelivery {
  return { messageId: request.messageId, attempt: answer.attempt, from: answer.from, leaseToken: null };
}

export function unclaimed(answer: Exclude<ClaimAnswer, { kind: 'claimed' }>): UnclaimedResult {
  return answer.kind === 'contended' ? BUSY_CONTENDED : answer;
}

/** A claim's answer as a batch run: `completed` when claimed (its work then runs, or ran with the claim). */
export function completedOr(request: ClaimRequest, answer: ClaimAnswer): BatchRun {
  return answer.kind === 'claimed' ? { kind: 'completed', claimed: claimedOf(request, answer) } : unclaimed(answer);
}

/** A claim's rows (`message_id`, `answer`) as one run per request, in order. */
export function batchRuns(requests: readonly ClaimRequest[], rows: readonly SqlRow[]): BatchRun[] {
  const answers = new Map(rows.map((r) => [String(r['message_id']), claimAnswer(r['answer'])]));
  return requests.map((r) => completedOr(r, answers.get(r.messageId) ?? CONTENDED));
}

/** What `_fail` answers: `w<row>` written, `n<row>` (or `n`) not. */
export function failureWrite(answer: unknown): FailureWrite {
  const text = typeof answer === 'string' ? answer : 'n';
  const current = text.length > 1 ? row(text.slice(1)) : undefined;
  return text.startsWith('w') ? { recorded: true, row: current! } : { recorded: false, row: current };
}

/** `busy` for a claim that met the lock timeout (55P03) or lost a race (40001, 40P01). */
export function busyOf(error: unknown): { readonly kind: 'busy'; readonly reason: BusyReason } | undefined {
  const state = sqlState(error);
  if (state === '55P03') return BUSY_TIMEOUT;
  return state === '40001' || state === '40P01' ? BUSY_CONTENDED : undefined;
}
