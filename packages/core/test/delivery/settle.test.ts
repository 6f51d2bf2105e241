// The settlement suite: what happens to a delivery for each outcome, specified over a recording port with no
// broker at all. Every transport settles through `settle()`, so this is the outcome → verb table of all three.

import { describe, expect, it } from 'vitest';
import { MessageTooLargeError, settle } from '../../src/index.js';
import type {
  BrokerSettlement,
  DeadLetterForm,
  DeadLetterOutcome,
  FormAttempt,
  GuardedOutcome,
  LeaveReason,
  Outcome,
  RetryOutcome,
} from '../../src/index.js';

type Call =
  | ['ack']
  | ['redeliver', number]
  | ['dead-letter', DeadLetterForm, string]
  | ['leave', LeaveReason['cause'], number];

interface Script {
  readonly redeliver?: FormAttempt['status'];
  /** Per form; a form not named is sent. */
  readonly deadLetter?: Partial<Record<DeadLetterForm, FormAttempt['status'] | 'throw'>>;
}

/** A port that records every verb in order and answers as scripted. */
function recordingPort(script: Script = {}): { port: BrokerSettlement<string>; calls: Call[] } {
  const calls: Call[] = [];
  const answer = (status: FormAttempt['status']): FormAttempt =>
    status === 'sent' ? { status } : { status, error: status === 'too-large' ? new MessageTooLargeError('too large') : new Error('broker down') };
  return {
    calls,
    port: {
      ack: (d) => {
        expect(d).toBe('delivery-1');
        calls.push(['ack']);
      },
      redeliver: async (_d, delayMs) => {
        calls.push(['redeliver', delayMs]);
        return answer(script.redeliver ?? 'sent');
      },
      deadLetter: async (_d, form, outcome) => {
        calls.push(['dead-letter', form, outcome.reason]);
        const status = script.deadLetter?.[form] ?? 'sent';
        if (status === 'throw') throw new Error('verb threw');
        return answer(status);
      },
      leave: (_d, why) => {
        calls.push(['leave', why.cause, why.holdMs]);
      },
    },
  };
}

const logs: { level: string; msg?: string }[] = [];
const logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (_o: object, msg?: string) => void logs.push({ level: 'warn', msg }),
  error: (_o: object, msg?: string) => void logs.push({ level: 'error', msg }),
};
const options = { logger, what: 'test' };

const processed: Outcome = { status: 'processed', messageId: 'm', attempt: 1, durationMs: 1 };
const duplicate: Outcome = { status: 'duplicate', messageId: 'm', reason: 'completed' };
const retry = (delayMs: number): RetryOutcome => ({ status: 'retry', messageId: 'm', delayMs, attempt: 2, reason: 'handler-error' });
const deadLetter: DeadLetterOutcome = { status: 'dead-letter', messageId: 'm', reason: 'permanent-error', attempts: 1 };

async function run(outcome: GuardedOutcome, script?: Script) {
  const { port, calls } = recordingPort(script);
  const settlement = await settle(port, 'delivery-1', outcome, options);
  return { settlement, calls };
}

describe('settle()', () => {
  it('acks a processed and a duplicate delivery, and does nothing else', async () => {
    for (const outcome of [processed, duplicate]) {
      expect(await run(outcome)).toEqual({ settlement: { action: 'acked' }, calls: [['ack']] });
    }
  });

  it('redelivers a retry after its delay and never acks it', async () => {
    expect(await run(retry(1_500))).toEqual({ settlement: { action: 'redelivered' }, calls: [['redeliver', 1_500]] });
    expect((await run(retry(0))).calls).toEqual([['redeliver', 0]]);
  });

  it('leaves a retry the broker did not take, held at most 5 s, and acks nothing', async () => {
    const { settlement, calls } = await run(retry(60_000), { redeliver: 'failed' });
    expect(calls).toEqual([['redeliver', 60_000], ['leave', 'redeliver-failed', 5_000]]);
    expect(settlement).toMatchObject({ action: 'left', why: { cause: 'redeliver-failed' } });
    expect((await run(retry(300), { redeliver: 'failed' })).calls.at(-1)).toEqual(['leave', 'redeliver-failed', 300]);
  });

  it('dead-letters a retry whose copy the broker can never take (retry-copy-too-large), then acks', async () => {
    const { settlement, calls } = await run(retry(1_000), { redeliver: 'too-large' });
    expect(calls).toEqual([['redeliver', 1_000], ['dead-letter', 'full', 'retry-copy-too-large'], ['ack']]);
    expect(settlement).toEqual({ action: 'dead-lettered', form: 'full' });
  });

  it('publishes the dead letter in its full form and acks only after it is confirmed', async () => {
    expect(await run(deadLetter)).toEqual({
      settlement: { action: 'dead-lettered', form: 'full' },
      calls: [['dead-letter', 'full', 'permanent-error'], ['ack']],
    });
  });

  it('falls back full → compact → minimal while the broker says too large, then acks once; never loops', async () => {
    logs.length = 0;
    const compact = await run(deadLetter, { deadLetter: { full: 'too-large' } });
    expect(compact.calls).toEqual([['dead-letter', 'full', 'permanent-error'], ['dead-letter', 'compact', 'permanent-error'], ['ack']]);
    expect(compact.settlement).toEqual({ action: 'dead-lettered', form: 'compact' });
    const minimal = await run(deadLetter, { deadLetter: { full: 'too-large', compact: 'too-large' } });
    expect(minimal.calls.map((c) => c[1])).toEqual(['full', 'compact', 'minimal', undefined]);
    expect(minimal.settlement).toEqual({ action: 'dead-lettered', form: 'minimal' });
    expect(logs.filter((l) => l.level === 'warn')).toHaveLength(2);
  });

  it('treats a dead-letter failure that may pass as an outage: no smaller form, no ack, the delivery is left', async () => {
    const { settlement, calls } = await run(deadLetter, { deadLetter: { full: 'failed' } });
    expect(calls).toEqual([['dead-letter', 'full', 'permanent-error'], ['leave', 'dead-letter-failed', 1_000]]);
    expect(settlement).toMatchObject({ action: 'left', why: { cause: 'dead-letter-failed' } });
    const late = await run(deadLetter, { deadLetter: { full: 'too-large', compact: 'failed' } });
    expect(late.calls.map((c) => c[0])).toEqual(['dead-letter', 'dead-letter', 'leave']);
  });

  it('counts a dead-letter verb that throws as a failure: left, not acked', async () => {
    const { calls } = await run(deadLetter, { deadLetter: { full: 'throw' } });
    expect(calls).toEqual([['dead-letter', 'full', 'permanent-error'], ['leave', 'dead-letter-failed', 1_000]]);
  });

  it('leaves the delivery when every form is too large, rather than ack it without a dead letter', async () => {
    const { settlement, calls } = await run(deadLetter, { deadLetter: { full: 'too-large', compact: 'too-large', minimal: 'too-large' } });
    expect(calls.map((c) => c[0])).toEqual(['dead-letter', 'dead-letter', 'dead-letter', 'leave']);
    expect(settlement).toMatchObject({ action: 'left', why: { cause: 'dead-letter-too-large' } });
  });

  it('leaves a delivery whose handle() rejected (a bug), and acks nothing', async () => {
    const { settlement, calls } = await run({ status: 'rejected', error: new Error('bug') });
    expect(calls).toEqual([['leave', 'handle-rejected', 1_000]]);
    expect(settlement.action).toBe('left');
  });

  it('never rejects, even when a verb does', async () => {
    const { port, calls } = recordingPort();
    const throwing: BrokerSettlement<string> = {
      ...port,
      redeliver: () => Promise.reject(new Error('boom')),
      leave: () => {
        calls.push(['leave', 'redeliver-failed', -1]);
        throw new Error('boom');
      },
    };
    await expect(settle(throwing, 'delivery-1', retry(10), options)).resolves.toMatchObject({ action: 'left' });
  });
});
