// What every adapter's handler transaction guarantees beyond the conformance suite: a handler that catches a
// failed statement and returns has not committed anything (Postgres answers such a COMMIT with a ROLLBACK), so
// the attempt fails instead of passing as processed with its effect lost; and the effect is in the inbox's
// transaction, not beside it (a failed attempt leaves no effect).

import { idempotentConsumer } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTERS, openAdapter, type AdapterName, type AdapterUnderTest } from './fixtures/adapters.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('handler_tx');
});
afterAll(async () => {
  await t?.close();
});

const message = (id: string) => ({ id, body: '{}', headers: {}, source: { transport: 'memory' } });

describe.each(Object.keys(ADAPTERS) as AdapterName[])('the %s handler transaction', (name) => {
  let adapter: AdapterUnderTest<object>;
  beforeAll(async () => {
    adapter = await openAdapter(name, t);
  });
  afterAll(async () => {
    await adapter?.close();
  });

  it('fails the attempt when the handler swallowed a failed statement: nothing committed, the retry applies once', async () => {
    const consumer = `${name}-swallowed`;
    let swallow = true;
    const c = idempotentConsumer<unknown, object>({
      name: consumer,
      store: adapter.store,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, { tx }) => {
        await adapter.applyEffect(tx, consumer, m.id);
        if (swallow) await adapter.failStatement(tx).catch(() => undefined);
      },
    });
    expect(await c.handle(message('m1'))).toMatchObject({ status: 'retry', attempt: 1 });
    expect(await countEffects(t.pool, t.schema, consumer)).toBe(0);
    swallow = false;
    expect(await c.handle(message('m1'))).toMatchObject({ status: 'processed', attempt: 2 });
    expect(await c.handle(message('m1'))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.pool, t.schema, consumer, 'm1')).toBe(1);
  });

  it('rolls the effect back with the attempt when the handler throws after writing it', async () => {
    const consumer = `${name}-throws`;
    const c = idempotentConsumer<unknown, object>({
      name: consumer,
      store: adapter.store,
      maxAttempts: 2,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, { tx }) => {
        await adapter.applyEffect(tx, consumer, m.id);
        throw new Error('after the effect');
      },
    });
    expect(await c.handle(message('m1'))).toMatchObject({ status: 'retry' });
    expect(await c.handle(message('m1'))).toMatchObject({ status: 'dead-letter', reason: 'max-attempts' });
    expect(await countEffects(t.pool, t.schema, consumer)).toBe(0);
  });
});
