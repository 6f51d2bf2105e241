// The payments consumer the demo runs: its table, its payload schemas (v1, and v2 with the fix), and the
// handler. This is the code a team would write; everything else in the demo is the stage around it.

import { idempotentConsumer, PermanentError, RetryableError } from '@inboxkit/core';
import type { IdempotentConsumer, InboxStore, OutcomeEvent } from '@inboxkit/core';
import { sql } from 'kysely';
import type { Generated, Kysely, Transaction } from 'kysely';
import { z } from 'zod';

import { CardDeclinedError, ProviderUnavailableError } from './payment-provider.js';
import type { FakePaymentProvider } from './payment-provider.js';

/** One row per charge. */
export interface PaymentsTable {
  id: Generated<number>;
  payment_id: string;
  message_id: string;
  customer: string;
  amount_cents: number;
  currency: string;
  provider_charge_id: string;
  downstream_key: string;
  charged_at: Generated<Date>;
}

export interface DemoDatabase {
  payments: PaymentsTable;
}

/**
 * Creates the payments table in the connection's current schema. It has no unique key on `payment_id` on
 * purpose: the inbox alone must keep each payment to one row, and the final check would see a second one.
 * (A real service adds the key as a second guard, as `examples/orders-rabbitmq` does.)
 */
export async function createPaymentsTable(db: Kysely<DemoDatabase>): Promise<void> {
  await sql`
    CREATE TABLE payments (
      id serial PRIMARY KEY,
      payment_id text NOT NULL,
      message_id text NOT NULL,
      customer text NOT NULL,
      amount_cents integer NOT NULL,
      currency text NOT NULL,
      provider_charge_id text NOT NULL,
      downstream_key text NOT NULL,
      charged_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

const paymentFields = {
  paymentId: z.string().min(1),
  customer: z.string().min(1),
  currency: z.enum(['EUR', 'USD']),
  card: z.string().min(1),
};

/** v1 of the payload: the amount in cents. */
export const paymentV1 = z.object({
  ...paymentFields,
  amountCents: z.number({ error: 'expected a whole number of cents' }).int().positive(),
});

/** The payment as the handler sees it. */
export type Payment = z.output<typeof paymentV1>;

/** The old mobile app still sends `"amount": "19.99"`. */
const oldAppPayment = z
  .object({ ...paymentFields, amount: z.string().regex(/^\d+\.\d{2}$/) })
  .transform(({ amount, ...rest }): Payment => ({ ...rest, amountCents: Math.round(Number(amount) * 100) }));

/** v2, the fix: v1, or the old app's format converted to cents. */
export const paymentV2 = z.union([paymentV1, oldAppPayment]);

/** Everything the consumer needs from the stage. */
export interface PaymentsConsumerOptions {
  readonly store: InboxStore<Transaction<DemoDatabase>>;
  readonly provider: FakePaymentProvider;
  /** `v1` at first; `v2` once the fix for the old app's format is deployed. */
  readonly version: 'v1' | 'v2';
  readonly onOutcome: (event: OutcomeEvent) => void;
}

/** The consumer's name: it scopes deduplication, so it must never change. */
export const CONSUMER_NAME = 'payments';

/**
 * The payments consumer. Transactional mode: the payments row and the inbox row commit together. The provider
 * call sits outside that transaction (a crash after it repeats it), so it carries `downstreamKey`, the same on
 * every attempt, and the provider answers a repeated key with the first charge.
 */
export function paymentsConsumer(
  options: PaymentsConsumerOptions,
): IdempotentConsumer<Payment, Transaction<DemoDatabase>> {
  const { provider } = options;
  return idempotentConsumer<Payment, Transaction<DemoDatabase>>({
    name: CONSUMER_NAME,
    store: options.store,
    schema: options.version === 'v1' ? paymentV1 : paymentV2,
    // Short retries so the demo does not wait; production keeps the defaults (1 s ×2 up to 5 min).
    backoff: { initialDelayMs: 50, jitter: 'none' },
    hooks: { onOutcome: options.onOutcome },
    handler: async (message, { tx, downstreamKey }) => {
      const payment = message.payload;
      let charge;
      try {
        charge = await provider.charge({
          idempotencyKey: downstreamKey,
          paymentId: payment.paymentId,
          amountCents: payment.amountCents,
          currency: payment.currency,
          card: payment.card,
        });
      } catch (error) {
        if (error instanceof CardDeclinedError) throw new PermanentError(error.message, { cause: error });
        if (error instanceof ProviderUnavailableError)
          throw new RetryableError(error.message, { cause: error });
        throw error;
      }
      await tx
        .insertInto('payments')
        .values({
          payment_id: payment.paymentId,
          message_id: message.id,
          customer: payment.customer,
          amount_cents: payment.amountCents,
          currency: payment.currency,
          provider_charge_id: charge.id,
          downstream_key: downstreamKey,
        })
        .execute();
    },
  });
}
