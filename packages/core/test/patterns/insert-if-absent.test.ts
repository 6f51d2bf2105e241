// The natural-key guard on real Postgres: one order published under two message ids is applied once, the
// second delivery says the key existed and under which id — sequentially and when both race.

import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import { insertIfAbsent } from '../../src/patterns/index.js';
import { PostgresInboxStore } from '../../src/postgres/index.js';
import { insertEffect, openTestDatabase, type TestDatabase, type TestTx } from '../support/postgres.js';

describe('insertIfAbsent', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('natural_key');
    await sql
      .raw(
        `CREATE TABLE "${t.schema}".orders (order_no text PRIMARY KEY, total_cents integer NOT NULL, message_id text NOT NULL)`,
      )
      .execute(t.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const orders = () => ({ schema: t.schema, name: 'orders' });
  const count = async (orderNo: string) =>
    (
      await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM ${sql.table(`${t.schema}.orders`)} WHERE order_no = ${orderNo}`.execute(
        t.db,
      )
    ).rows[0]!.n;

  it('inserts a new key and reports the row that holds a taken one', async () => {
    const first = await insertIfAbsent(t.db, {
      table: orders(),
      values: { order_no: 'A-1', total_cents: 100, message_id: 'm-1' },
      key: ['order_no'],
      existing: ['message_id', 'total_cents'],
    });
    expect(first).toEqual({ inserted: true });
    const second = await insertIfAbsent(t.db, {
      table: orders(),
      values: { order_no: 'A-1', total_cents: 999, message_id: 'm-2' },
      key: ['order_no'],
      existing: ['message_id', 'total_cents'],
    });
    expect(second).toEqual({ inserted: false, existing: { message_id: 'm-1', total_cents: 100 } });
    expect(await count('A-1')).toBe(1);
  });

  it('applies one order published under two message ids once, through the consumer', async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const existed: unknown[] = [];
    const consumer = idempotentConsumer<{ orderNo: string; total: number }, TestTx>({
      name: 'orders-natural-key',
      store,
      handler: async (m, { tx }) => {
        const order = await insertIfAbsent(tx, {
          table: { schema: t.schema, name: 'orders' },
          values: { order_no: m.payload.orderNo, total_cents: m.payload.total, message_id: m.id },
          key: ['order_no'],
          existing: ['message_id'],
        });
        if (!order.inserted) {
          existed.push(order.existing);
          return;
        }
        // The rest of the effect runs only for the first id: counted without a unique key.
        await insertEffect(tx, t.schema, 'orders-natural-key', m.payload.orderNo);
        // Widen the window in which the second id races the first one's commit.
        await sleep(20);
      },
    });
    const delivery = (id: string) => ({
      id,
      body: JSON.stringify({ orderNo: 'B-7', total: 700 }),
      headers: {},
      source: { transport: 'memory' as const },
    });
    // Two ids for one order, concurrently: both claim (different ids), one order insert waits for the other.
    const outcomes = await Promise.all([
      consumer.handle(delivery('msg-a')),
      consumer.handle(delivery('msg-b')),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['processed', 'processed']);
    expect(await count('B-7')).toBe(1);
    const effects = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM ${sql.table(`${t.schema}.effects`)} WHERE consumer = 'orders-natural-key'`.execute(
      t.db,
    );
    expect(effects.rows[0]!.n).toBe(1);
    expect(existed).toHaveLength(1);
    expect(['msg-a', 'msg-b']).toContain((existed[0] as { message_id: string }).message_id);
  });

  it('refuses values that lack a key column', async () => {
    await expect(
      insertIfAbsent(t.db, {
        table: orders(),
        values: { total_cents: 1, message_id: 'x' },
        key: ['order_no'],
      }),
    ).rejects.toThrow(/order_no/);
  });
});
