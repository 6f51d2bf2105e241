import { describe, expect, it } from 'vitest';
import { fingerprintPayload } from '../src/fingerprint.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { InMemoryInboxStore } from '../src/memory/index.js';
import { PermanentError } from '../src/errors.js';
import { replayDecision } from '../src/replay-decision.js';

describe('replayDecision', () => {
  it('predicts from the inbox row what a replay would do, and agrees with the consumer', async () => {
    const store = new InMemoryInboxStore();
    let fail = true;
    const consumer = idempotentConsumer({
      name: 'replays',
      store,
      handler: async () => {
        if (fail) throw new PermanentError('no');
      },
    });
    const message = (id: string, replayId?: string) => ({
      id,
      body: JSON.stringify({ id }),
      headers: {},
      source: { transport: 'memory' },
      ...(replayId ? { replay: { replayId } } : {}),
    });
    await consumer.handle(message('dead'));
    fail = false;
    await consumer.handle(message('done'));
    const [dead] = await store.findRows('replays', ['dead']);
    const [done] = await store.findRows('replays', ['done']);
    expect(replayDecision(undefined, 'r1')).toBe('no-row');
    expect(replayDecision(done, 'r1')).toBe('skip-completed');
    expect(replayDecision(dead, 'r1')).toBe('reopen');
    expect(replayDecision(dead, 'r1', fingerprintPayload({ id: 'other' }))).toBe('payload-mismatch');
    expect(replayDecision(dead, 'r1', fingerprintPayload({ id: 'dead' }))).toBe('reopen');
    fail = true;
    await consumer.handle(message('dead', 'r1'));
    const [again] = await store.findRows('replays', ['dead']);
    expect(replayDecision(again, 'r1')).toBe('skip-already-replayed');
    expect(replayDecision(again, 'r2')).toBe('reopen');
    expect(replayDecision({ ...again!, status: 'failed' }, 'r2')).toBe('in-progress');
  });
});
