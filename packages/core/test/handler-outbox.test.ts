// context.outbox: the consumer's `outbox` binder is called once per run, on first use, with the run's
// transaction and origin; a consumer without one fails the attempt with a ConfigurationError that says what to pass.

import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import type { InboundMessage } from '../src/message.js';
import type { HandlerOutbox, OutboxOrigin } from '../src/consumer-types.js';

const message = (id: string): InboundMessage => ({ id, body: '{}', headers: {}, source: { transport: 'memory' } });

describe('context.outbox', () => {
  it('binds the outbox to the run transaction and origin, once per run, only when used', async () => {
    const binds: { tx: InMemoryTransaction; origin: OutboxOrigin }[] = [];
    const seenTx: InMemoryTransaction[] = [];
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'with-outbox',
      store: new InMemoryInboxStore(),
      outbox: (tx, origin) => {
        binds.push({ tx, origin });
        // A stand-in: typed through unknown because @inboxkit/outbox widens HandlerOutbox when compiled together.
        const stand: unknown = { marker: origin.messageId };
        return stand as HandlerOutbox;
      },
      handler: async (m, context) => {
        if (m.id === 'silent') return;
        seenTx.push(context.tx);
        const first = context.outbox;
        expect(context.outbox).toBe(first);
        expect(first).toEqual({ marker: m.id });
      },
    });
    expect(await consumer.handle(message('a'))).toMatchObject({ status: 'processed' });
    expect(await consumer.handle(message('silent'))).toMatchObject({ status: 'processed' });
    expect(binds).toHaveLength(1);
    expect(binds[0]!.origin).toEqual({ consumer: 'with-outbox', messageId: 'a', attempt: 1 });
    expect(binds[0]!.tx).toBe(seenTx[0]);
  });

  it('fails the attempt with a ConfigurationError naming the option when no outbox is configured', async () => {
    let thrown: unknown;
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'no-outbox',
      store: new InMemoryInboxStore(),
      maxAttempts: 1,
      handler: async (_m, context) => {
        try {
          void context.outbox;
        } catch (error) {
          thrown = error;
          throw error;
        }
      },
    });
    expect((await consumer.handle(message('a'))).status).toBe('dead-letter');
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect((thrown as Error).message).toMatch(/outbox: transactionalOutbox\(\)/);
  });

  it('refuses an outbox option that is not a function at start-up', () => {
    expect(() =>
      idempotentConsumer({ name: 'bad', store: new InMemoryInboxStore(), handler: async () => {}, outbox: {} as never }),
    ).toThrow(/outbox must be a function/);
  });
});
