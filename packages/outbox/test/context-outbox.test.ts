// context.outbox through transactionalOutbox() with a real PostgresInboxStore: the outgoing row commits with
// the effect, a failed attempt leaves neither, a retried attempt with a step leaves one row with the same id,
// and the handler's `outbox` is typed by this package's declaration merging (no casts below).

import { ConfigurationError, idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { deterministicMessageId, transactionalOutbox } from '../src/index.js';
import { openOutboxDb, type OutboxTestDb } from './support.js';

interface Db {
  charges: { message_id: string; amount: number };
}

describe('context.outbox (transactionalOutbox)', () => {
  let t: OutboxTestDb;
  let schema: string;
  beforeAll(async () => {
    t = await openOutboxDb('outbox_context');
    schema = t.schema.schema;
    await migrateInbox(t.db, { schema });
    await sql`CREATE TABLE ${sql.raw(`"${schema}".charges`)} (message_id text NOT NULL, amount integer NOT NULL)`.execute(t.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const outboxRows = async () =>
    (
      await sql<{ id: string; destination: string; partition_key: string | null }>`SELECT id, destination, partition_key
        FROM ${sql.raw(`"${schema}"."outbox"`)} ORDER BY seq`.execute(t.db)
    ).rows;
  const charges = async (id: string) =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.raw(`"${schema}".charges`)} WHERE message_id = ${id}`.execute(t.db))
      .rows[0]!.n;
  const delivery = (id: string, amount = 5): InboundMessage => ({
    id,
    body: JSON.stringify({ amount }),
    headers: {},
    source: { transport: 'memory' },
  });
  const pause = () => new Promise((resolve) => setTimeout(resolve, 20)); // past the 1 ms backoff

  it('commits the effect and the outgoing row together; a failed attempt leaves neither; a retry with a step leaves one row, same id', async () => {
    const failures = new Map<string, number>([['pay-2', 2]]);
    const returned: string[] = [];
    const consumer = idempotentConsumer<{ amount: number }, Transaction<Db>>({
      name: 'payments',
      store: new PostgresInboxStore<Db>({ db: t.db as never, schema }),
      outbox: transactionalOutbox({ schema }),
      backoff: { initialDelayMs: 1, maxDelayMs: 1 },
      handler: async (message, { tx, outbox }) => {
        expectTypeOf<ReturnType<typeof outbox.enqueue>>().toEqualTypeOf<Promise<string>>();
        await tx.insertInto('charges').values({ message_id: message.id, amount: message.payload.amount }).execute();
        returned.push(
          await outbox.enqueue(
            { publisher: 'kafka', destination: 'payments.charged', key: 'acct-1', body: JSON.stringify(message.payload) },
            { step: 'charge' },
          ),
        );
        const left = failures.get(message.id) ?? 0;
        if (left > 0) {
          failures.set(message.id, left - 1);
          throw new Error('ledger hiccup after the enqueue');
        }
      },
    });

    expect((await consumer.handle(delivery('pay-1'))).status).toBe('processed');
    const first = deterministicMessageId('payments', 'pay-1', 'charge');
    expect(await outboxRows()).toEqual([{ id: first, destination: 'payments.charged', partition_key: 'acct-1' }]);
    expect(await charges('pay-1')).toBe(1);

    expect((await consumer.handle(delivery('pay-2'))).status).toBe('retry');
    expect(await outboxRows()).toHaveLength(1);
    expect(await charges('pay-2')).toBe(0);
    await pause();
    expect((await consumer.handle(delivery('pay-2'))).status).toBe('retry');
    await pause();
    expect((await consumer.handle(delivery('pay-2'))).status).toBe('processed');
    const second = deterministicMessageId('payments', 'pay-2', 'charge');
    expect((await outboxRows()).map((r) => r.id)).toEqual([first, second]);
    expect(await charges('pay-2')).toBe(1);
    // Every attempt computed the same id.
    expect(returned).toEqual([first, second, second, second]);

    expect((await consumer.handle(delivery('pay-2'))).status).toBe('duplicate');
    expect(await outboxRows()).toHaveLength(2);
  });

  it('without a step each enqueue gets a fresh UUIDv7; messageId(step) and origin describe the delivery; step and id together are refused', async () => {
    const seen: { id: string; derived: string; consumer: string; messageId: string; attempt: number }[] = [];
    let refused: unknown;
    const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
      name: 'notifier',
      store: new PostgresInboxStore({ db: t.db, schema }),
      outbox: transactionalOutbox({ schema }),
      handler: async (_message, { outbox }) => {
        const id = await outbox.enqueue({ destination: 'notifications', body: 'hi' });
        seen.push({ id, derived: outbox.messageId(3), ...outbox.origin });
        // @ts-expect-error -- the merged type requires a destination
        await outbox.enqueue({ body: 'no destination' }).catch(() => undefined);
        refused = await outbox.enqueue({ destination: 'x', body: 'x', id: id }, { step: 'x' }).catch((e: unknown) => e);
      },
    });
    expect((await consumer.handle(delivery('n-1'))).status).toBe('processed');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    expect(seen[0]).toMatchObject({ derived: deterministicMessageId('notifier', 'n-1', 3), consumer: 'notifier', messageId: 'n-1', attempt: 1 });
    expect(refused).toBeInstanceOf(ConfigurationError);
    expect((await outboxRows()).filter((r) => r.destination === 'notifications')).toHaveLength(1);
  });

  it('validates its table options up front', () => {
    expect(() => transactionalOutbox({ schema: 'bad name' })).toThrow(ConfigurationError);
  });
});
