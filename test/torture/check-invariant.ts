// The verdict of a torture run, from what is durable (never from the consumers' own reports): the effects
// table (no unique constraint on the message id, so a double effect is two rows), the inbox rows, and every
// copy in the DLQ. The invariant:
//   - every distinct non-poison id applied exactly once: no id applied twice, none missing;
//   - every poison id in the DLQ (copies deduplicated by original id; extra copies counted, not failed) with
//     the reason it must carry, and never applied;
//   - nothing else applied and nothing else dead-lettered: a healthy id in the DLQ (e.g. `max-attempts` after
//     crashes that charged it attempts it never ran) is a violation;
//   - the inbox agrees: good ids `completed`, poison ids `dead_lettered`.

import type { MessagePlan } from './message-plan.js';
import type { DeadLetterCopy } from './transports/transport-rig.js';

export interface InboxState {
  readonly status: string;
  readonly reason: string | null;
}

export interface Evidence {
  /** Effect rows per message id. */
  readonly effects: ReadonlyMap<string, number>;
  /** Inbox row per message id (of the run's consumer). */
  readonly inbox: ReadonlyMap<string, InboxState>;
  readonly deadLetters: readonly DeadLetterCopy[];
}

export interface Verdict {
  /** Good ids applied more than once, and the extra rows. */
  readonly appliedTwice: number;
  readonly extraEffectRows: number;
  /** Good ids never applied. */
  readonly lost: number;
  /** Good (healthy, non-poison) ids with a copy in the DLQ. */
  readonly healthyDeadLettered: number;
  /** Poison ids in the DLQ (distinct) / expected. */
  readonly deadLettered: number;
  readonly poisonExpected: number;
  /** DLQ copies beyond the first of an id (a redelivered poison message is dead-lettered again). */
  readonly extraDeadLetterCopies: number;
  /** Every violated rule, with up to a few example ids each. Empty = the invariant holds. */
  readonly violations: readonly string[];
}

const EXAMPLES = 5;

function examples(ids: readonly string[]): string {
  return ids.slice(0, EXAMPLES).join(', ') + (ids.length > EXAMPLES ? `, … (${ids.length})` : '');
}

export function checkInvariant(plan: MessagePlan, evidence: Evidence): Verdict {
  const violations: string[] = [];
  const twice: string[] = [];
  const lost: string[] = [];
  let extraRows = 0;
  for (const id of plan.good) {
    const n = evidence.effects.get(id) ?? 0;
    if (n === 0) lost.push(id);
    if (n > 1) {
      twice.push(id);
      extraRows += n - 1;
    }
  }
  if (twice.length > 0)
    violations.push(
      `effects applied twice: ${twice.length} ids, ${extraRows} extra rows (${examples(twice)})`,
    );
  if (lost.length > 0)
    violations.push(`lost (never applied, not in the DLQ as poison): ${lost.length} ids (${examples(lost)})`);

  const poisonApplied = [...plan.poison.keys()].filter((id) => (evidence.effects.get(id) ?? 0) > 0);
  if (poisonApplied.length > 0)
    violations.push(`poison applied: ${poisonApplied.length} ids (${examples(poisonApplied)})`);
  const unknownEffects = [...evidence.effects.keys()].filter((id) => !plan.kinds.has(id));
  if (unknownEffects.length > 0)
    violations.push(`effects of ids never sent: ${unknownEffects.length} (${examples(unknownEffects)})`);

  // The DLQ, copies grouped by original id.
  const copies = new Map<string, string[]>();
  let anonymous = 0;
  for (const copy of evidence.deadLetters) {
    if (copy.id === undefined) {
      anonymous += 1;
      continue;
    }
    const reasons = copies.get(copy.id) ?? [];
    reasons.push(copy.reason ?? '(no reason)');
    copies.set(copy.id, reasons);
  }
  if (anonymous > 0) violations.push(`DLQ copies without an original id: ${anonymous}`);
  let extraCopies = 0;
  let deadLettered = 0;
  const missing: string[] = [];
  const wrongReason: string[] = [];
  for (const [id, expected] of plan.poison) {
    const reasons = copies.get(id);
    if (reasons === undefined) {
      missing.push(id);
      continue;
    }
    deadLettered += 1;
    extraCopies += reasons.length - 1;
    if (!reasons.includes(expected))
      wrongReason.push(`${id}: ${[...new Set(reasons)].join('/')} (expected ${expected})`);
  }
  if (missing.length > 0)
    violations.push(`poison missing from the DLQ: ${missing.length} ids (${examples(missing)})`);
  if (wrongReason.length > 0)
    violations.push(`poison dead-lettered with the wrong reason: ${examples(wrongReason)}`);
  const healthyDead: string[] = [];
  const unknownDead: string[] = [];
  for (const [id, reasons] of copies) {
    if (plan.poison.has(id)) continue;
    extraCopies += reasons.length - 1;
    (plan.good.has(id) ? healthyDead : unknownDead).push(`${id} (${[...new Set(reasons)].join('/')})`);
  }
  if (healthyDead.length > 0)
    violations.push(`healthy ids dead-lettered: ${healthyDead.length} ids (${examples(healthyDead)})`);
  if (unknownDead.length > 0)
    violations.push(`dead letters of ids never sent: ${unknownDead.length} ids (${examples(unknownDead)})`);

  // The inbox must say the same.
  const notCompleted: string[] = [];
  for (const id of plan.good) {
    const row = evidence.inbox.get(id);
    if (row?.status !== 'completed')
      notCompleted.push(
        `${id}: ${row === undefined ? 'no row' : `${row.status}${row.reason ? ` ${row.reason}` : ''}`}`,
      );
  }
  if (notCompleted.length > 0)
    violations.push(
      `inbox rows of good ids not completed: ${notCompleted.length} (${examples(notCompleted)})`,
    );
  const poisonRows: string[] = [];
  for (const [id, expected] of plan.poison) {
    const row = evidence.inbox.get(id);
    if (row?.status !== 'dead_lettered' || row.reason !== expected) {
      poisonRows.push(`${id}: ${row === undefined ? 'no row' : `${row.status} ${row.reason ?? ''}`.trim()}`);
    }
  }
  if (poisonRows.length > 0)
    violations.push(
      `inbox rows of poison ids not dead_lettered with their reason: ${poisonRows.length} (${examples(poisonRows)})`,
    );

  return {
    appliedTwice: twice.length,
    extraEffectRows: extraRows,
    lost: lost.length,
    healthyDeadLettered: healthyDead.length,
    deadLettered,
    poisonExpected: plan.poison.size,
    extraDeadLetterCopies: extraCopies,
    violations,
  };
}
