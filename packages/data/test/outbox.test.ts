// The outbox inside each adapter's transaction: `context.outbox.enqueue` (transactionalOutbox) and
// `enqueue(context.tx, …)` write rows that commit with the inbox record and the effect, and leave nothing when
// the attempt fails; the transaction object is refused once the handler's transaction has ended.

import { ConfigurationError, idempotentConsumer } from '@inboxkit/core';
import { enqueue, migrateOutbox, transactionalOutbox } from '@inboxkit/outbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTERS, openAdapter, type AdapterName, type AdapterUnderTest } from './fixtures/adapters.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('outbox');
  await migrateOutbox(t.db, { schema: t.schema });
});
afterAll(async () => {
  await t?.close();
});

async function outboxRows(
  destination: string,
): Promise<{ destination: string; payload_text: boolean; body: string }[]> {
  const { rows } = await t.pool.query<{ destination: string; payload_text: boolean; body: string }>(
    `SELECT destination, payload_text, convert_from(payload, 'UTF8') AS body FROM "${t.schema}".outbox WHERE destination LIKE $1 ORDER BY seq`,
    [`${destination}%`],
  );
  return rows;
}

describe.each(Object.keys(ADAPTERS) as AdapterName[])('the outbox in the %s adapter transaction', (name) => {
  let adapter: AdapterUnderTest<object>;
  beforeAll(async () => {
    adapter = await openAdapter(name, t);
  });
  afterAll(async () => {
    await adapter?.close();
  });

  it('commits enqueued messages with the effect, and none of a failed attempt', async () => {
    const consumer = `${name}-outbox`;
    let fail = true;
    let kept: object | undefined;
    const c = idempotentConsumer<unknown, object>({
      name: consumer,
      store: adapter.store,
      outbox: transactionalOutbox({ schema: t.schema, notify: name === 'pg' }),
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (message, { tx, outbox }) => {
        kept = tx;
        await adapter.applyEffect(tx, consumer, message.id);
        await outbox.enqueue(
          { destination: `${consumer}.step`, body: `step ${message.id}` },
          { step: 'one' },
        );
        await enqueue(
          tx,
          { destination: `${consumer}.direct`, body: new TextEncoder().encode(`direct ${message.id}`) },
          { schema: t.schema },
        );
        if (fail) throw new Error('fails after enqueueing');
      },
    });
    const message = { id: 'm1', body: '{}', headers: {}, source: { transport: 'memory' } };
    expect(await c.handle(message)).toMatchObject({ status: 'retry' });
    expect(await outboxRows(consumer)).toEqual([]);
    fail = false;
    expect(await c.handle(message)).toMatchObject({ status: 'processed' });
    expect(await outboxRows(consumer)).toEqual([
      { destination: `${consumer}.step`, payload_text: true, body: 'step m1' },
      { destination: `${consumer}.direct`, payload_text: false, body: 'direct m1' },
    ]);
    expect(await countEffects(t.pool, t.schema, consumer, 'm1')).toBe(1);
    // The handler's transaction has ended: its object no longer writes into any transaction.
    await expect(
      enqueue(kept as object, { destination: `${consumer}.late`, body: 'late' }, { schema: t.schema }),
    ).rejects.toThrow(ConfigurationError);
  });
});
