// The attempt ledger: an idempotent consumer records started attempts for the delivery kit without showing it
// on its interface, and a wrapper forwards it.

import { describe, expect, it } from 'vitest';
import { attemptLedgerOf, idempotentConsumer, withAttemptLedger } from '../../src/index.js';
import type { InboundMessage } from '../../src/index.js';
import { InMemoryInboxStore } from '../../src/memory/index.js';

const message = (id: string): InboundMessage => ({
  id,
  body: '{}',
  headers: {},
  source: { transport: 'test', destination: 'q' },
});

describe('attempt ledger', () => {
  it('is carried by every idempotent consumer, off its enumerable surface', () => {
    const consumer = idempotentConsumer({ name: 'ledger', store: new InMemoryInboxStore(), handler: async () => {} });
    expect(attemptLedgerOf(consumer)).toBeDefined();
    expect(Object.keys(consumer)).not.toContain('recordAttemptsStarted');
    expect('recordAttemptsStarted' in consumer).toBe(false);
    expect('crashSuspects' in consumer).toBe(false);
    // A spread copies only enumerable own properties: the copy has no ledger.
    expect(attemptLedgerOf({ ...consumer })).toBeUndefined();
  });

  it('records started attempts a crash then charges, and names the suspects', async () => {
    const store = new InMemoryInboxStore();
    const consumer = idempotentConsumer({ name: 'ledger', store, handler: async () => {}, maxAttempts: 5 });
    const ledger = attemptLedgerOf(consumer)!;
    await ledger.recordAttemptsStarted([message('started')]);
    await ledger.recordAttemptsStarted([message('started')]);
    expect(Object.fromEntries(await ledger.crashSuspects!([message('started'), message('new')]))).toEqual({
      started: 2,
      new: 0,
    });
  });

  it('is forwarded by a wrapper through withAttemptLedger', () => {
    const consumer = idempotentConsumer({ name: 'ledger', store: new InMemoryInboxStore(), handler: async () => {} });
    const wrapper = withAttemptLedger({ handle: consumer.handle.bind(consumer) }, attemptLedgerOf(consumer)!);
    expect(attemptLedgerOf(wrapper)).toBe(attemptLedgerOf(consumer));
    expect(Object.keys(wrapper)).toEqual(['handle']);
  });

  it('is absent from what is not an object', () => {
    expect(attemptLedgerOf(undefined)).toBeUndefined();
    expect(attemptLedgerOf(null)).toBeUndefined();
    expect(attemptLedgerOf('consumer')).toBeUndefined();
  });
});
