// The verdict of a pipeline torture run, from what is durable: the service's effects, inbox and source DLQ
// (checked with the transport torture's own checker), the outbox table, and the sink's effects, inbox and
// DLQ. The headline invariant: every good source id took effect at the sink exactly once — none twice, none
// lost — and nothing else took effect there. The sink sees the outgoing id, deterministicMessageId(service,
// source id, step); the checker maps it back to the source id (an id it cannot map is an effect of a message
// the service never meant to send, e.g. a fresh id minted by a retried attempt).

import { deterministicMessageId } from '@inboxkit/outbox';

import type { Evidence, InboxState, Verdict } from './check-invariant.js';
import { checkInvariant } from './check-invariant.js';
import type { MessagePlan } from './message-plan.js';
import { PIPELINE_STEP } from './pipeline-settings.js';
import type { DeadLetterCopy } from './transports/transport-rig.js';

export interface OutboxState {
  /** Rows in the outbox table. */
  readonly rows: number;
  /** Rows neither dispatched nor parked. */
  readonly undispatched: number;
  readonly parked: number;
}

export interface SinkEvidence {
  /** Effect rows per incoming (outgoing-side) message id. */
  readonly effects: ReadonlyMap<string, number>;
  readonly inbox: ReadonlyMap<string, InboxState>;
  readonly deadLetters: readonly DeadLetterCopy[];
}

export interface PipelineEvidence {
  readonly service: Evidence;
  readonly outbox: OutboxState;
  readonly sink: SinkEvidence;
}

export interface PipelineVerdict {
  /** The service stage (the transport torture's invariant on the source). */
  readonly service: Verdict;
  /** Good source ids applied more than once at the sink, and the extra rows. */
  readonly sinkAppliedTwice: number;
  readonly sinkExtraRows: number;
  /** Good source ids never applied at the sink. */
  readonly sinkLost: number;
  /** Sink effects of ids that are not a good source id's outgoing id. */
  readonly sinkUnexpected: number;
  /** Effect rows at the sink beyond one per good source id, whatever their ids (copies under fresh ids count too). */
  readonly sinkSurplusRows: number;
  readonly outbox: OutboxState;
  /** Every violated rule (service rules prefixed `service:`, sink rules `sink:`). Empty = the invariant holds. */
  readonly violations: readonly string[];
}

const EXAMPLES = 5;

function examples(ids: readonly string[]): string {
  return ids.slice(0, EXAMPLES).join(', ') + (ids.length > EXAMPLES ? `, … (${ids.length})` : '');
}

/** The id the service gives the message it emits for `sourceId`. */
export function outgoingId(serviceName: string, sourceId: string): string {
  return deterministicMessageId(serviceName, sourceId, PIPELINE_STEP);
}

export function checkPipeline(
  plan: MessagePlan,
  serviceName: string,
  evidence: PipelineEvidence,
): PipelineVerdict {
  const violations: string[] = [];
  const service = checkInvariant(plan, evidence.service);
  for (const v of service.violations) violations.push(`service: ${v}`);

  const sourceOf = new Map<string, string>();
  for (const id of plan.kinds.keys()) sourceOf.set(outgoingId(serviceName, id), id);
  const sinkEffects = new Map<string, number>();
  const unexpected: string[] = [];
  for (const [id, n] of evidence.sink.effects) {
    const source = sourceOf.get(id);
    if (source === undefined || !plan.good.has(source))
      unexpected.push(source === undefined ? id : `${source} (poison)`);
    else sinkEffects.set(source, n);
  }
  const twice: string[] = [];
  const lost: string[] = [];
  let extraRows = 0;
  for (const id of plan.good) {
    const n = sinkEffects.get(id) ?? 0;
    if (n === 0) lost.push(id);
    if (n > 1) {
      twice.push(id);
      extraRows += n - 1;
    }
  }
  if (twice.length > 0)
    violations.push(
      `sink: effects applied twice: ${twice.length} source ids, ${extraRows} extra rows (${examples(twice)})`,
    );
  if (lost.length > 0)
    violations.push(`sink: lost (never applied at the sink): ${lost.length} source ids (${examples(lost)})`);
  let sinkRows = 0;
  for (const n of evidence.sink.effects.values()) sinkRows += n;
  const surplus = Math.max(0, sinkRows - plan.good.size);
  if (surplus > 0)
    violations.push(
      `sink: ${sinkRows} effect rows for ${plan.good.size} good source ids (${surplus} more than one each)`,
    );
  if (unexpected.length > 0)
    violations.push(
      `sink: effects of messages the service did not emit for a good source id: ${unexpected.length} (${examples(unexpected)})`,
    );

  const notCompleted: string[] = [];
  for (const id of plan.good) {
    const row = evidence.sink.inbox.get(outgoingId(serviceName, id));
    if (row?.status !== 'completed') notCompleted.push(`${id}: ${row === undefined ? 'no row' : row.status}`);
  }
  if (notCompleted.length > 0)
    violations.push(
      `sink: inbox rows of good source ids not completed: ${notCompleted.length} (${examples(notCompleted)})`,
    );
  if (evidence.sink.deadLetters.length > 0)
    violations.push(
      `sink: dead-lettered: ${evidence.sink.deadLetters.length} copies (${examples(evidence.sink.deadLetters.map((c) => `${sourceOf.get(c.id ?? '') ?? c.id ?? '?'} ${c.reason ?? ''}`.trim()))})`,
    );

  const { outbox } = evidence;
  if (outbox.rows !== plan.good.size)
    violations.push(`outbox: ${outbox.rows} rows for ${plan.good.size} good source ids (one each expected)`);
  if (outbox.undispatched > 0) violations.push(`outbox: ${outbox.undispatched} rows never dispatched`);
  if (outbox.parked > 0) violations.push(`outbox: ${outbox.parked} rows parked`);

  return {
    service,
    sinkAppliedTwice: twice.length,
    sinkExtraRows: extraRows,
    sinkLost: lost.length,
    sinkUnexpected: unexpected.length,
    sinkSurplusRows: surplus,
    outbox,
    violations,
  };
}
