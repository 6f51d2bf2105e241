// The runnable example of docs/testing.md, kept identical to it: if this file changes, change the page.

import { PermanentError, idempotentConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import type { InMemoryTransaction } from '@inboxkit/core/memory';
import { LearningTransport, OutcomeRecorder, assertIdempotentHandler } from '@inboxkit/testing';
import { afterEach, describe, expect, it } from 'vitest';

interface OrderPlaced {
  readonly orderId: string;
  readonly total: number;
}

// The consumer under test. In production the store is a PostgresInboxStore and `tx` a Kysely transaction;
// here the in-memory store stages effects that count only if the transaction commits.
function ordersConsumer(store: InMemoryInboxStore, recorder = new OutcomeRecorder()) {
  return idempotentConsumer<OrderPlaced, InMemoryTransaction>({
    name: 'orders',
    store,
    handler: async (message, { tx }) => {
      if (message.payload.total < 0) throw new PermanentError('negative total');
      tx.stage({ orderId: message.payload.orderId, total: message.payload.total });
    },
    backoff: { initialDelayMs: 10, jitter: 'none' },
    hooks: { onOutcome: recorder.hook },
  });
}

const order = { id: 'order-1', body: JSON.stringify({ orderId: 'o-1', total: 25 }) };

describe('the orders consumer', () => {
  let transport: LearningTransport<OrderPlaced, InMemoryTransaction> | undefined;
  afterEach(async () => {
    await transport?.stop();
    transport = undefined;
  });

  it('applies an order exactly once however it is delivered', async () => {
    const store = new InMemoryInboxStore();
    await assertIdempotentHandler(ordersConsumer(store), order, {
      countEffects: ({ id }) => store.countEffects('orders', id),
    });
  });

  it('applies an order once through a crash between the handler and the commit', async () => {
    const store = new InMemoryInboxStore();
    transport = new LearningTransport({ consumer: ordersConsumer(store), visibilityTimeoutMs: 20 });
    await transport.start();
    transport.injectCrash('after-handler-before-commit', { id: 'order-1' });
    await transport.send([order]);
    transport.duplicate('order-1', 2); // the producer retried its publish twice
    await transport.drain();
    expect(store.countEffects('orders', 'order-1')).toBe(1);
    expect(transport.stats.crashes['after-handler-before-commit']).toBe(1);
  });

  it('dead-letters an order with a negative total, with the reason in the headers', async () => {
    const store = new InMemoryInboxStore();
    const recorder = new OutcomeRecorder();
    transport = new LearningTransport({ consumer: ordersConsumer(store, recorder) });
    await transport.start();
    await transport.send([{ id: 'order-2', body: JSON.stringify({ orderId: 'o-2', total: -1 }) }]);
    const event = await recorder.waitFor('order-2', 'dead-letter');
    expect(event.outcome).toMatchObject({ reason: 'permanent-error', attempts: 1 });
    await transport.drain(); // hooks run before the transport settles: wait for the DLQ write
    const [letter] = transport.deadLetters();
    expect(letter?.headers['x-inboxkit-reason']).toBe('permanent-error');
    expect(letter?.headers['x-inboxkit-error-message']).toBe('negative total');
  });
});

describe('docs/testing.md', () => {
  it('shows this example unchanged', async () => {
    const { readFile } = await import('node:fs/promises');
    const self = await readFile(new URL(import.meta.url), 'utf8');
    const page = await readFile(new URL('../../../docs/testing.md', import.meta.url), 'utf8');
    const example = self
      .slice(self.indexOf('import '), self.indexOf("\ndescribe('docs/testing.md'"))
      .trimEnd();
    expect(page).toContain(`\`\`\`ts\n${example}\n\`\`\``);
  });
});
