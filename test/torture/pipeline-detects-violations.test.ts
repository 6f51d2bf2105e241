// The pipeline checker can fail: from evidence built by hand (what a correct run leaves, then the same with one
// source id applied twice at the sink, one never applied, one effect under an id the service never derived),
// it must pass the first and name each violation in the others. No services: the checker is a pure function.
// (`npm run torture -- --transport pipeline --break` shows the same end to end: a service that publishes from
// the handler without the outbox.)

import { describe, expect, it } from 'vitest';

import type { InboxState } from './check-invariant.js';
import { planMessages } from './message-plan.js';
import type { PipelineEvidence } from './pipeline-check.js';
import { checkPipeline, outgoingId } from './pipeline-check.js';
import { seededRandom } from './prng.js';
import { SHARES } from './run-torture.js';

const SERVICE = 'pipeline-service';
const plan = planMessages(seededRandom(42, 'pipeline').fork('plan'), {
  messages: 100,
  duplicateShare: SHARES.duplicates,
  poisonShare: SHARES.poison,
  transientShare: SHARES.transient,
  prefix: 'p',
});

/** What a correct run leaves: each good id applied once at the service and once (under its outgoing id) at the sink. */
function correct(): {
  service: PipelineEvidence['service'];
  outbox: PipelineEvidence['outbox'];
  sinkEffects: Map<string, number>;
  sinkInbox: Map<string, InboxState>;
} {
  const effects = new Map<string, number>();
  const inbox = new Map<string, InboxState>();
  const sinkEffects = new Map<string, number>();
  const sinkInbox = new Map<string, InboxState>();
  for (const id of plan.good) {
    effects.set(id, 1);
    inbox.set(id, { status: 'completed', reason: null });
    sinkEffects.set(outgoingId(SERVICE, id), 1);
    sinkInbox.set(outgoingId(SERVICE, id), { status: 'completed', reason: null });
  }
  for (const [id, reason] of plan.poison) inbox.set(id, { status: 'dead_lettered', reason });
  return {
    service: { effects, inbox, deadLetters: [...plan.poison].map(([id, reason]) => ({ id, reason })) },
    outbox: { rows: plan.good.size, undispatched: 0, parked: 0 },
    sinkEffects,
    sinkInbox,
  };
}

function check(e: ReturnType<typeof correct>) {
  return checkPipeline(plan, SERVICE, {
    service: e.service,
    outbox: e.outbox,
    sink: { effects: e.sinkEffects, inbox: e.sinkInbox, deadLetters: [] },
  });
}

describe('pipeline checker', () => {
  const [first, second] = [...plan.good];

  it('passes what a correct run leaves', () => {
    const verdict = check(correct());
    expect(verdict.violations).toEqual([]);
    expect(
      verdict.sinkAppliedTwice + verdict.sinkLost + verdict.sinkUnexpected + verdict.sinkSurplusRows,
    ).toBe(0);
  });

  it('reports a source id applied twice at the sink', () => {
    const e = correct();
    e.sinkEffects.set(outgoingId(SERVICE, first!), 2);
    const verdict = check(e);
    expect(verdict.sinkAppliedTwice).toBe(1);
    expect(verdict.sinkExtraRows).toBe(1);
    expect(verdict.sinkSurplusRows).toBe(1);
    expect(verdict.violations.join('\n')).toMatch(
      new RegExp(`sink: effects applied twice: 1 source ids, 1 extra rows \\(${first}\\)`),
    );
  });

  it('reports a source id lost on the way to the sink (applied at the service, never at the sink)', () => {
    const e = correct();
    e.sinkEffects.delete(outgoingId(SERVICE, second!));
    e.sinkInbox.delete(outgoingId(SERVICE, second!));
    const verdict = check(e);
    expect(verdict.sinkLost).toBe(1);
    expect(verdict.service.violations).toEqual([]);
    expect(verdict.violations.join('\n')).toMatch(
      new RegExp(`sink: lost \\(never applied at the sink\\): 1 source ids \\(${second}\\)`),
    );
  });

  it('reports a second copy under a fresh id (a dual write retried) and an outbox that does not hold one row per id', () => {
    const e = correct();
    e.sinkEffects.set('0190aaaa-0000-7000-8000-000000000001', 1);
    const verdict = check({ ...e, outbox: { rows: plan.good.size + 1, undispatched: 1, parked: 0 } });
    expect(verdict.sinkUnexpected).toBe(1);
    expect(verdict.sinkSurplusRows).toBe(1);
    expect(verdict.violations.join('\n')).toMatch(
      /sink: \d+ effect rows for \d+ good source ids \(1 more than one each\)/,
    );
    expect(verdict.violations.join('\n')).toMatch(/effects of messages the service did not emit/);
    expect(verdict.violations.join('\n')).toMatch(/outbox: \d+ rows for \d+ good source ids/);
    expect(verdict.violations.join('\n')).toMatch(/outbox: 1 rows never dispatched/);
  });
});
