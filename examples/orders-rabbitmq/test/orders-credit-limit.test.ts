// The credit limit against real Postgres: a customer's two orders handled at the same moment, each under the
// limit and together over it — one is applied, the other is dead-lettered with its reason and leaves no row.
// Without the advisory lock both transactions read the customer's total before either commits, and both apply.

import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import type { InboundMessage } from '@inboxkit/core';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createTestSchema } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { createOrdersTables, ordersConsumer } from '../src/orders-consumer.js';
import type { OrdersDatabase } from '../src/orders-consumer.js';

let schema: TestSchema;
let db: Kysely<OrdersDatabase>;

beforeAll(async () => {
  schema = await createTestSchema('orders_credit');
  db = new Kysely<OrdersDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  await migrateInbox(db, { schema: schema.schema });
  await createOrdersTables(db);
  await db.insertInto('products').values({ sku: 'credit-sku', available: 1_000_000 }).execute();
});

afterAll(async () => {
  await schema?.cleanup();
});

function order(orderNo: string, customer: string, priceCents: number): InboundMessage {
  const body = {
    orderNo,
    customer,
    placedAt: new Date().toISOString(),
    lines: [{ sku: 'credit-sku', quantity: 1, priceCents }],
  };
  return { id: `msg-${orderNo}`, body: JSON.stringify(body), headers: {}, source: { transport: 'memory' } };
}

describe('orders consumer with a credit limit', () => {
  it('applies one of two concurrent orders that together go over a customer’s limit', async () => {
    const consumer = ordersConsumer({
      store: new PostgresInboxStore({ db, schema: schema.schema }),
      creditLimitCents: 1_000,
    });
    const customers = Array.from({ length: 8 }, (_, i) => `credit-customer-${i}`);
    const outcomes = await Promise.all(
      customers.flatMap((c) => [
        consumer.handle(order(`${c}-a`, c, 600)),
        consumer.handle(order(`${c}-b`, c, 600)),
      ]),
    );
    const deadLettered = outcomes.filter((o) => o.status === 'dead-letter');
    expect(outcomes.filter((o) => o.status === 'processed')).toHaveLength(customers.length);
    expect(deadLettered).toHaveLength(customers.length);
    for (const o of deadLettered)
      expect(o).toMatchObject({ reason: 'permanent-error', error: { code: 'CREDIT_LIMIT' } });

    const owed = await db
      .selectFrom('orders')
      .select(['customer', (eb) => eb.fn.sum<number>('total_cents').as('owed')])
      .where('customer', 'in', customers)
      .groupBy('customer')
      .execute();
    expect(owed.map((r) => [r.customer, Number(r.owed)]).sort()).toEqual(customers.map((c) => [c, 600]));
    // The refused orders left no lines behind either.
    const lines = await db
      .selectFrom('order_lines')
      .select('order_no')
      .where('sku', '=', 'credit-sku')
      .execute();
    expect(lines).toHaveLength(customers.length);
  });
});
