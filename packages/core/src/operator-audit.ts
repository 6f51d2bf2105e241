// The audit lines of an operator's deliberate acts on inbox rows — an amended payload (edit and retry), a
// forgotten completed row, a discarded or archived dead letter (postgres/dead-letter-lifecycle.ts) — written to the replay audit next to the replays they concern, so one message's
// history reads in one place. Their `outcome` text has a fixed form that `parseOperatorAudit` reads back.

/** An operator's act, as read back from the audit. */
export type OperatorAudit =
  | {
      readonly action: 'amended';
      /** The fingerprint the row held before (`null`: none recorded). */
      readonly fromFingerprint: string | null;
      readonly toFingerprint: string;
      readonly reason: string;
    }
  | { readonly action: 'forgotten'; readonly fingerprint: string | null; readonly reason: string }
  | {
      readonly action: 'discarded' | 'archived';
      /** The row's state before the act (`dead_lettered`, or `archived` for a discarded archive). */
      readonly priorStatus: string;
      /** Its dead-letter reason before the act (`null`: none recorded). */
      readonly priorReason: string | null;
      readonly reason: string;
    };

const NONE = 'none';

/** The audit outcome of an amended payload: `amended <from> -> <to>: <reason>`. */
export function amendmentOutcome(fromFingerprint: string | null, toFingerprint: string, reason: string): string {
  return `amended ${fromFingerprint ?? NONE} -> ${toFingerprint}: ${reason}`;
}

/** The audit outcome of a forgotten row: `forgotten <fingerprint>: <reason>`. */
export function forgetOutcome(fingerprint: string | null, reason: string): string {
  return `forgotten ${fingerprint ?? NONE}: ${reason}`;
}

/**
 * Reads an audit line's outcome back (`discarded dead_lettered/max-attempts: <why>` is a discarded dead letter); `undefined` for a replay's own outcome (`reopened …`, `skipped-completed …`).
 *
 * @example
 * parseOperatorAudit('amended ab12 -> cd34: amount was negative');
 * // { action: 'amended', fromFingerprint: 'ab12', toFingerprint: 'cd34', reason: 'amount was negative' }
 */
export function parseOperatorAudit(outcome: string): OperatorAudit | undefined {
  const amended = /^amended (\S+) -> (\S+): ([\s\S]*)$/.exec(outcome);
  if (amended !== null) {
    return {
      action: 'amended',
      fromFingerprint: amended[1] === NONE ? null : amended[1]!,
      toFingerprint: amended[2]!,
      reason: amended[3]!,
    };
  }
  const forgotten = /^forgotten (\S+): ([\s\S]*)$/.exec(outcome);
  if (forgotten !== null) {
    return { action: 'forgotten', fingerprint: forgotten[1] === NONE ? null : forgotten[1]!, reason: forgotten[2]! };
  }
  const retired = /^(discarded|archived) (\w+)\/(\S+): ([\s\S]*)$/.exec(outcome);
  if (retired !== null) {
    return {
      action: retired[1] as 'discarded' | 'archived',
      priorStatus: retired[2]!,
      priorReason: retired[3] === NONE ? null : retired[3]!,
      reason: retired[4]!,
    };
  }
  return undefined;
}
