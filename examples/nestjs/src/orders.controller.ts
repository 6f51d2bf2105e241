// The orders consumer: an ordinary Nest controller whose @EventPattern handler runs inside the inbox
// transaction (InboxkitTransport). Its insert commits with the inbox record, or not at all.

import { Controller } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { InboxCtx, InboxTx, type InboxContext } from '@inboxkit/nestjs/transport';
import type pg from 'pg';
import { z } from 'zod';

/** What an `orders.placed` message carries; validated by the consumer before the handler runs. */
export const OrderPlaced = z.object({ orderId: z.string().min(1), totalCents: z.number().int().positive() });
export type OrderPlaced = z.infer<typeof OrderPlaced>;

@Controller()
export class OrdersController {
  @EventPattern<string>('orders.placed')
  async placed(
    @Payload() order: OrderPlaced,
    @InboxTx() tx: pg.PoolClient,
    @InboxCtx() ctx: InboxContext,
  ): Promise<void> {
    await tx.query('INSERT INTO orders (order_id, total_cents, message_id) VALUES ($1, $2, $3)', [
      order.orderId,
      order.totalCents,
      ctx.message.id,
    ]);
  }
}
