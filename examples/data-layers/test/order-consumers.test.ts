// Each data layer's orders consumer applies every order once when it is delivered twice at once and again later.

import { describe, expect, it } from 'vitest';
import { openInboxTestDatabase } from '../../../test/support/inbox-database.js';
import { deliverTwice } from '../src/deliver-twice.js';
import { ADAPTERS, openOrders } from '../src/order-consumers.js';

describe.each(ADAPTERS)('the orders consumer over %s', (adapter) => {
  it('applies each order once', async () => {
    const t = await openInboxTestDatabase<unknown>(`example_${adapter.replace('-', '_')}`);
    try {
      await t.pool.query(`CREATE TABLE "${t.schema}".orders (id text PRIMARY KEY, total_cents int NOT NULL)`);
      const consumer = await openOrders(adapter, t);
      const orders = Array.from({ length: 10 }, (_, i) => ({ id: String(i), totalCents: 100 * i }));
      const result = await deliverTwice(consumer, orders);
      await consumer.close();
      expect(result).toEqual({ processed: 10, duplicates: 20, other: [] });
      const { rows } = await t.pool.query<{ id: string; total_cents: number }>(
        `SELECT id, total_cents FROM "${t.schema}".orders ORDER BY id::int`,
      );
      expect(rows).toEqual(orders.map((o) => ({ id: o.id, total_cents: o.totalCents })));
    } finally {
      await t.close();
    }
  });
});
