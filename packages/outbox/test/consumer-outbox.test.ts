// enqueue inside idempotentConsumer's handler, through context.tx: the outgoing row commits with the inbox
// record and the effect, a failed attempt leaves none, and a duplicate delivery adds none.

import { idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deterministicMessageId, enqueue } from '../src/index.js';
import { openOutboxDb, type OutboxTestDb } from './support.js';

describe('enqueue from an idempotentConsumer handler', () => {
  let t: OutboxTestDb;
  beforeAll(async () => {
    t = await openOutboxDb('outbox_consumer');
    await migrateInbox(t.db, { schema: t.schema.schema });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('commits the outgoing row with the inbox record: none after a failed attempt, one after success, none for a duplicate', async () => {
    const schema = t.schema.schema;
    let failNext = true;
    const consumer = idempotentConsumer<{ order: string }, Transaction<unknown>>({
      name: 'orders',
      store: new PostgresInboxStore({ db: t.db, schema }),
      backoff: { initialDelayMs: 1, maxDelayMs: 1 },
      handler: async (message, context) => {
        await enqueue(
          context.tx,
          {
            destination: 'orders.created',
            key: message.payload.order,
            body: JSON.stringify(message.payload),
            id: deterministicMessageId(context.consumer, message.id, 'created'),
          },
          { schema },
        );
        if (failNext) {
          failNext = false;
          throw new Error('downstream hiccup after enqueue');
        }
      },
    });
    const delivery: InboundMessage = { id: 'in-1', body: JSON.stringify({ order: 'o-1' }), headers: {}, source: { transport: 'memory' } };
    const rows = async () =>
      (await sql<{ id: string }>`SELECT id FROM ${sql.raw(`"${schema}"."outbox"`)}`.execute(t.db)).rows.map((r) => r.id);

    expect((await consumer.handle(delivery)).status).toBe('retry');
    expect(await rows()).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 20)); // past the 1 ms backoff
    expect((await consumer.handle(delivery)).status).toBe('processed');
    expect(await rows()).toEqual([deterministicMessageId('orders', 'in-1', 'created')]);
    expect((await consumer.handle(delivery)).status).toBe('duplicate');
    expect(await rows()).toHaveLength(1);
  });
});
