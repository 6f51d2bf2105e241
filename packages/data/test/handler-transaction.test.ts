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

  for (const end of ['commit', 'rollback'] as const) {
    it(`refuses the library's own ${end}() on the handler's transaction: dead-lettered as transaction-control, attempts counted, nothing committed`, async (ctx) => {
      if (adapter.endThroughLibrary === undefined) return ctx.skip();
      const consumer = `${name}-library-${end}`;
      let runs = 0;
      const c = idempotentConsumer<unknown, object>({
        name: consumer,
        store: adapter.store,
        maxAttempts: 3,
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          runs++;
          await adapter.applyEffect(tx, consumer, m.id);
          await adapter.endThroughLibrary!(tx, end).catch(() => undefined);
          if (end === 'commit') throw new TypeError('after the commit');
          await adapter.applyEffect(tx, consumer, m.id);
        },
      });
      const outcomes = [];
      for (let i = 0; i < 4; i++) outcomes.push(await c.handle(message('m1')));
      expect(outcomes[0]).toMatchObject({ status: 'dead-letter', reason: 'transaction-control', attempts: 1 });
      for (const o of outcomes.slice(1)) expect(o).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
      expect(runs).toBe(1);
      expect(await countEffects(t.pool, t.schema, consumer)).toBe(0);
    });
  }

  it('refuses COMMIT and ROLLBACK sent through the handler transaction before they reach Postgres: nothing committed', async () => {
    const consumer = `${name}-raw`;
    const c = idempotentConsumer<unknown, object>({
      name: consumer,
      store: adapter.store,
      handler: async (m, { tx }) => {
        await adapter.applyEffect(tx, consumer, m.id);
        await adapter.sendStatement(tx, m.id.startsWith('c') ? 'COMMIT' : 'ROLLBACK').catch(() => undefined);
        await adapter.applyEffect(tx, consumer, m.id);
      },
    });
    expect(await c.handle(message('c1'))).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
    expect(await c.handle(message('r1'))).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
    expect(await countEffects(t.pool, t.schema, consumer)).toBe(0);
    // The handler's own savepoints are its business, and a statement that only mentions COMMIT is no control.
    const fine = idempotentConsumer<unknown, object>({
      name: `${consumer}-fine`,
      store: adapter.store,
      handler: async (m, { tx }) => {
        await adapter.sendStatement(tx, "SELECT 'COMMIT; ROLLBACK' AS t -- commit");
        await adapter.applyEffect(tx, `${consumer}-fine`, m.id);
      },
    });
    expect(await fine.handle(message('f1'))).toMatchObject({ status: 'processed' });
  });

  for (const control of ['COMMIT', 'ROLLBACK']) {
    it(`finds a ${control} that slipped past the refusal (the connection's status): dead-lettered, never processed, never applied twice`, async (ctx) => {
      if (adapter.sendUnwatched === undefined) return ctx.skip();
      const consumer = `${name}-slipped-${control}`;
      const c = idempotentConsumer<unknown, object>({
        name: consumer,
        store: adapter.store,
        handler: async (m, { tx }) => {
          await adapter.sendUnwatched!(tx, control);
          await adapter.applyEffect(tx, consumer, m.id);
        },
      });
      const first = await c.handle(message('m1'));
      expect(first).toMatchObject({ status: 'dead-letter', reason: 'transaction-control', attempts: 1 });
      expect((first as { error?: { message: string } }).error?.message).toMatch(/may have committed/);
      const again = await c.handle(message('m1'));
      expect(again.status).not.toBe('processed');
      expect(await countEffects(t.pool, t.schema, consumer, 'm1')).toBe(1);
    });
  }

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
