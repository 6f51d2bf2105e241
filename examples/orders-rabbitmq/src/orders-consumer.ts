// The orders consumer: an `OrderPlaced` event becomes an order, its lines and a stock reservation, all in the
// transaction that also records the message in the inbox (transactional mode, the default). The order number
// is unique as well: a second guard for what no inbox can see, one order published under two message ids
// (insertIfAbsent from @inboxkit/core/patterns, docs/patterns.md). With a credit limit, a customer's orders are
// checked against it one at a time (advisoryLock): the limit is a sum over rows, and no row to lock holds it.

import { idempotentConsumer, PermanentError } from '@inboxkit/core';
import { advisoryLock, insertIfAbsent } from '@inboxkit/core/patterns';
import type { IdempotentConsumer, InboxStore, Logger, OutcomeEvent } from '@inboxkit/core';
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import { z } from 'zod';

/** The service's tables. */
export interface OrdersDatabase {
  products: { sku: string; available: number };
  orders: { order_no: string; customer: string; total_cents: number; message_id: string; placed_at: Date };
  order_lines: { order_no: string; sku: string; quantity: number; price_cents: number };
}

/** Creates the tables (idempotent; a real service would keep these in its own migrations). */
export async function createOrdersTables(db: Kysely<OrdersDatabase>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS products (
      sku text PRIMARY KEY,
      available integer NOT NULL CHECK (available >= 0)
    )`.execute(db);
  // order_no is the natural key: the second guard. message_id is kept for reconciliation (operations.md).
  await sql`
    CREATE TABLE IF NOT EXISTS orders (
      order_no text PRIMARY KEY,
      customer text NOT NULL,
      total_cents integer NOT NULL,
      message_id text NOT NULL,
      placed_at timestamptz NOT NULL
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS order_lines (
      order_no text NOT NULL REFERENCES orders (order_no),
      sku text NOT NULL REFERENCES products (sku),
      quantity integer NOT NULL CHECK (quantity > 0),
      price_cents integer NOT NULL,
      PRIMARY KEY (order_no, sku)
    )`.execute(db);
}

/** The `OrderPlaced` event. */
export const orderPlaced = z.object({
  orderNo: z.string().min(1),
  customer: z.string().min(1),
  placedAt: z.iso.datetime(),
  lines: z
    .array(
      z.object({
        sku: z.string().min(1),
        quantity: z.number().int().positive(),
        priceCents: z.number().int().nonnegative(),
      }),
    )
    .min(1),
});
export type OrderPlaced = z.output<typeof orderPlaced>;

/** An order that arrived again under another message id: the producer sent one intent twice. */
export interface SecondGuardEvent {
  readonly orderNo: string;
  readonly messageId: string;
  /** The message id the order was first applied under. */
  readonly firstMessageId: string;
}

/** Options of `ordersConsumer`. */
export interface OrdersConsumerOptions {
  readonly store: InboxStore<Transaction<OrdersDatabase>>;
  /** Called when the order number was already taken (count it: it should stay at 0). */
  readonly onSecondGuard?: (event: SecondGuardEvent) => void;
  /**
   * The most a customer's orders may total, in cents; an order that would go over it is dead-lettered
   * (`PermanentError`, code `CREDIT_LIMIT`) and applies nothing. Default is no limit.
   */
  readonly creditLimitCents?: number;
  readonly backoff?: { readonly initialDelayMs?: number; readonly jitter?: 'full' | 'none' };
  readonly logger?: Logger;
  readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
}

/** Builds the consumer. Its name, `orders`, scopes deduplication: never rename it. */
export function ordersConsumer(
  options: OrdersConsumerOptions,
): IdempotentConsumer<OrderPlaced, Transaction<OrdersDatabase>> {
  return idempotentConsumer<OrderPlaced, Transaction<OrdersDatabase>>({
    name: 'orders',
    store: options.store,
    schema: orderPlaced,
    ...(options.backoff !== undefined ? { backoff: options.backoff } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.onOutcome !== undefined ? { hooks: { onOutcome: options.onOutcome } } : {}),
    handler: async (message, { tx, logger }) => {
      const order = message.payload;
      const total = order.lines.reduce((sum, line) => sum + line.quantity * line.priceCents, 0);
      // Two orders of one customer applied at once would each read the other's total as 0 (READ COMMITTED).
      // The lock makes the second wait for the first's commit (it is the transaction's: COMMIT or ROLLBACK
      // releases it); still busy after 5 s, the delivery is retried later.
      if (options.creditLimitCents !== undefined)
        await advisoryLock(tx, { key: ['customer-credit', order.customer] });
      // The natural key first (insertIfAbsent: INSERT … ON CONFLICT (order_no) DO NOTHING, and the row that
      // holds the key read back only on a conflict), so nothing else is applied for an order we have.
      const inserted = await insertIfAbsent(tx, {
        table: 'orders',
        values: {
          order_no: order.orderNo,
          customer: order.customer,
          total_cents: total,
          message_id: message.id,
          placed_at: new Date(order.placedAt),
        },
        key: ['order_no'],
        existing: ['message_id'],
      });
      if (!inserted.inserted) {
        // The inbox saw a new message id, the order number says it is an order we have. Apply nothing, and
        // make it visible: a producer minting a new id per publish attempt is a bug to fix at the source.
        const first = inserted.existing?.['message_id'];
        const firstMessageId = typeof first === 'string' ? first : '';
        logger.warn(
          { orderNo: order.orderNo, messageId: message.id, firstMessageId },
          'orders: order already applied under another message id',
        );
        options.onSecondGuard?.({ orderNo: order.orderNo, messageId: message.id, firstMessageId });
        return;
      }
      if (options.creditLimitCents !== undefined) {
        const { owed } = await tx
          .selectFrom('orders')
          .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('total_cents'), eb.lit(0)).as('owed'))
          .where('customer', '=', order.customer)
          .executeTakeFirstOrThrow();
        // Thrown inside the transaction: the order row above rolls back with it.
        if (Number(owed) > options.creditLimitCents)
          throw new PermanentError(
            `over the credit limit: ${order.customer} would owe ${owed} cents, the limit is ${options.creditLimitCents}`,
            { code: 'CREDIT_LIMIT' },
          );
      }
      for (const line of order.lines) {
        const reserved = await tx
          .updateTable('products')
          .set((eb) => ({ available: eb('available', '-', line.quantity) }))
          .where('sku', '=', line.sku)
          .where('available', '>=', line.quantity)
          .returning('sku')
          .executeTakeFirst();
        // Thrown inside the transaction: the order row above rolls back with it.
        if (reserved === undefined)
          throw new PermanentError(`out of stock: ${line.sku} × ${line.quantity}`, { code: 'OUT_OF_STOCK' });
        await tx
          .insertInto('order_lines')
          .values({
            order_no: order.orderNo,
            sku: line.sku,
            quantity: line.quantity,
            price_cents: line.priceCents,
          })
          .execute();
      }
    },
  });
}
