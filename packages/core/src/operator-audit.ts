// The audit lines of an operator's deliberate acts on one inbox row — an amended payload (edit and retry) and
// a forgotten completed row — written to the replay audit next to the replays they concern, so one message's
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
  | { readonly action: 'forgotten'; readonly fingerprint: string | null; readonly reason: string };

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
 * Reads an audit line's outcome back; `undefined` for a replay's own outcome (`reopened …`, `skipped-completed …`).
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
  return undefined;
}
