import type { InboundMessage, Outcome } from '@inboxkit/core';
import { describe, expect, it } from 'vitest';

import { OutcomeRecorder } from '../src/index.js';

const message = (id: string | undefined): InboundMessage => ({
  id,
  body: '{}',
  headers: {},
  source: { transport: 'memory' },
});
const processed = (id: string): Outcome => ({
  status: 'processed',
  messageId: id,
  attempt: 1,
  durationMs: 1,
});
const retry = (id: string, attempt: number): Outcome => ({
  status: 'retry',
  messageId: id,
  attempt,
  delayMs: 100,
  reason: 'handler-error',
  error: { name: 'Error', message: 'boom' },
});

function feed(recorder: OutcomeRecorder, id: string | undefined, outcome: Outcome): void {
  recorder.hook({ consumer: 'c', message: message(id), outcome });
}

describe('OutcomeRecorder', () => {
  it('resolves waitFor with an outcome recorded before or after the call', async () => {
    const recorder = new OutcomeRecorder();
    feed(recorder, 'a', processed('a'));
    await expect(recorder.waitFor('a', 'processed')).resolves.toMatchObject({ id: 'a', index: 0 });
    const pending = recorder.waitFor('b', (o) => o.status === 'retry' && o.attempt === 2);
    feed(recorder, 'b', retry('b', 1));
    feed(recorder, 'b', retry('b', 2));
    await expect(pending).resolves.toMatchObject({ index: 2, outcome: { attempt: 2 } });
  });

  it('counts by status and lists outcomes per id', () => {
    const recorder = new OutcomeRecorder();
    feed(recorder, 'a', retry('a', 1));
    feed(recorder, 'a', processed('a'));
    feed(recorder, 'b', { status: 'duplicate', messageId: 'b', reason: 'completed' });
    feed(recorder, undefined, {
      status: 'dead-letter',
      messageId: undefined,
      reason: 'missing-id',
      attempts: 0,
    });
    expect(recorder.counts()).toEqual({ processed: 1, duplicate: 1, retry: 1, 'dead-letter': 1 });
    expect(recorder.count('processed', 'a')).toBe(1);
    expect(recorder.count(undefined, 'a')).toBe(2);
    expect(recorder.outcomes('a').map((o) => o.status)).toEqual(['retry', 'processed']);
    expect(recorder.events.find((e) => e.outcome.status === 'dead-letter')?.id).toBeUndefined();
    recorder.clear();
    expect(recorder.events).toHaveLength(0);
  });

  it('waitForCount resolves with the first n matching outcomes', async () => {
    const recorder = new OutcomeRecorder();
    const pending = recorder.waitForCount(2, { status: ['processed', 'duplicate'], id: 'x' });
    feed(recorder, 'x', retry('x', 1));
    feed(recorder, 'y', processed('y'));
    feed(recorder, 'x', processed('x'));
    feed(recorder, 'x', { status: 'duplicate', messageId: 'x', reason: 'completed' });
    const events = await pending;
    expect(events.map((e) => e.outcome.status)).toEqual(['processed', 'duplicate']);
  });

  it('rejects on timeout with what it saw', async () => {
    const recorder = new OutcomeRecorder();
    feed(recorder, 'a', retry('a', 1));
    feed(recorder, 'b', processed('b'));
    const error: unknown = await recorder
      .waitFor('a', 'processed', { timeoutMs: 10 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const text = (error as Error).message;
    expect(text).toContain('no processed outcome for message "a" within 10 ms');
    expect(text).toContain('#0 "a" retry (attempt 1, handler-error, delay 100 ms, Error: boom)');
    expect(text).toContain('#1 "b" processed (attempt 1)');
    await expect(recorder.waitForCount(5, { timeoutMs: 10 })).rejects.toThrow(
      /expected 5 outcomes, saw 2 within 10 ms/,
    );
  });
});
