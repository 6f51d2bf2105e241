// billing-consumer.ts: one invoice per order, exactly once.
import { idempotentConsumer, PermanentError } from '@inboxkit/core';
import type { IdempotentConsumer, InboxStore, Logger, OutcomeEvent } from '@inboxkit/core';
import type { Transaction } from 'kysely';
import { z } from 'zod';

/** Your tables, as Kysely sees them. */
export interface Database {
  invoices: { order_id: string; amount_cents: number; message_id: string };
}

export const OrderPlaced = z.object({
  orderId: z.string().min(1),
  amountCents: z.number().int(),
});
export type OrderPlaced = z.output<typeof OrderPlaced>;

export function billingConsumer(options: {
  store: InboxStore<Transaction<Database>>;
  logger?: Logger;
  onOutcome?: (event: OutcomeEvent) => void;
}): IdempotentConsumer<OrderPlaced, Transaction<Database>> {
  return idempotentConsumer<OrderPlaced, Transaction<Database>>({
    name: 'billing', // scopes deduplication: never rename a consumer in production
    store: options.store,
    schema: OrderPlaced, // invalid payloads are dead-lettered as `schema-invalid`
    ...(options.logger ? { logger: options.logger } : {}),
    hooks: { onOutcome: options.onOutcome },
    handler: async (message, { tx }) => {
      if (message.payload.amountCents <= 0) {
        throw new PermanentError(`order ${message.payload.orderId} has no amount`); // DLQ now, no retries
      }
      // Every write goes through `tx`: it commits with the inbox row, or not at all.
      await tx
        .insertInto('invoices')
        .values({
          order_id: message.payload.orderId,
          amount_cents: message.payload.amountCents,
          message_id: message.id,
        })
        .execute();
    },
  });
}
