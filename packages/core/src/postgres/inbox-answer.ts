// What the inbox's functions answer (inbox-sql.ts), read back: a claim's answer, and a row as json (rowJson).

import type { ClaimedFrom, InboxRow, InboxRowState } from '../store.js';

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
