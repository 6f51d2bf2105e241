// At-least-once delivery as it really happens: every order is delivered twice at the same moment (a producer
// retry, a redelivery after a timeout), and once more later. The inbox must apply each order once.

import type { Outcome } from '@inboxkit/core';
import type { Order, OrdersConsumer } from './order-consumers.js';

/** How the deliveries ended. */
export interface Deliveries {
  readonly processed: number;
  readonly duplicates: number;
  readonly other: readonly Outcome[];
}

/** Delivers `orders` twice at once, then each a third time; counts the outcomes. */
export async function deliverTwice(
  { consumer }: OrdersConsumer,
  orders: readonly Order[],
): Promise<Deliveries> {
  const deliver = (order: Order): Promise<Outcome> =>
    consumer.handle({
      id: `order-${order.id}`,
      body: JSON.stringify(order),
      headers: {},
      source: { transport: 'example' },
    });
  const outcomes = [
    ...(await Promise.all(orders.flatMap((order) => [deliver(order), deliver(order)]))),
    ...(await Promise.all(orders.map(deliver))),
  ];
  return {
    processed: outcomes.filter((o) => o.status === 'processed').length,
    duplicates: outcomes.filter((o) => o.status === 'duplicate').length,
    other: outcomes.filter((o) => o.status !== 'processed' && o.status !== 'duplicate'),
  };
}
