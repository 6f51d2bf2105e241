// The payments consumer: charge the card at the provider, then record the charge. The charge is an effect
// outside Postgres, so the consumer runs in leased mode: the claim commits first with a lease and a fencing
// token, the provider call runs outside any transaction, and the payment row commits with the completion only
// while the lease is still held. The provider call is at-least-once; `downstreamKey`, the same on every
// attempt, is what turns it into one charge.

import { idempotentConsumer, PermanentError, RetryableError } from '@inboxkit/core';
import { insertIfAbsent } from '@inboxkit/core/patterns';
import type { HandlerContext, IdempotentConsumer, InboxStore, Logger, OutcomeEvent } from '@inboxkit/core';
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import { z } from 'zod';

/** The service's table: one row per charged payment. */
export interface PaymentsDatabase {
  payments: {
    payment_id: string;
    provider_charge_id: string;
    amount_cents: number;
    currency: string;
    charged_at: Date;
  };
}

/** Creates the payments table (idempotent; a real service would put this in its own migrations). */
export async function createPaymentsTable(db: Kysely<PaymentsDatabase>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS payments (
      payment_id text PRIMARY KEY,
      provider_charge_id text NOT NULL,
      amount_cents integer NOT NULL CHECK (amount_cents > 0),
      currency text NOT NULL,
      charged_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

/** The `PaymentRequested` event. */
export const paymentRequested = z.object({
  paymentId: z.string().min(1),
  amountCents: z.number().int().positive(),
  currency: z.enum(['EUR', 'USD', 'GBP']),
  card: z.string().min(1),
});
export type PaymentRequested = z.output<typeof paymentRequested>;

/** Options of `paymentsConsumer`. */
export interface PaymentsConsumerOptions {
  readonly store: InboxStore<Transaction<PaymentsDatabase>>;
  /** The provider's base URL. */
  readonly providerUrl: string;
  /**
   * The Idempotency-Key sent to the provider. Default is `context.downstreamKey`. The tests pass a key that
   * changes per attempt to show what goes wrong without it; do not do that.
   */
  readonly idempotencyKey?: (context: HandlerContext<Transaction<PaymentsDatabase>>) => string;
  /** The lease and handler timeout; default 60 s and 30 s. Tests shorten them. */
  readonly leaseMs?: number;
  readonly handlerTimeoutMs?: number;
  readonly backoff?: {
    readonly initialDelayMs?: number;
    readonly maxDelayMs?: number;
    readonly jitter?: 'full' | 'none';
  };
  readonly logger?: Logger;
  readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
}

/** The provider's answer to a charge. */
interface ChargeResponse {
  readonly id: string;
  readonly replayed: boolean;
}

/** Builds the consumer. Its name, `payments`, scopes deduplication: never rename it. */
export function paymentsConsumer(
  options: PaymentsConsumerOptions,
): IdempotentConsumer<PaymentRequested, Transaction<PaymentsDatabase>> {
  const idempotencyKey = options.idempotencyKey ?? ((context) => context.downstreamKey);
  return idempotentConsumer<PaymentRequested, Transaction<PaymentsDatabase>>({
    name: 'payments',
    store: options.store,
    schema: paymentRequested,
    mode: 'leased',
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.handlerTimeoutMs !== undefined ? { handlerTimeoutMs: options.handlerTimeoutMs } : {}),
    ...(options.backoff !== undefined ? { backoff: options.backoff } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.onOutcome !== undefined ? { hooks: { onOutcome: options.onOutcome } } : {}),
    handler: async (message, context) => {
      const payment = message.payload;
      // No transaction is open yet: the lease, not a database connection, guards this call.
      const response = await fetch(`${options.providerUrl}/v1/charges`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey(context) },
        body: JSON.stringify(payment),
        // Aborted when the handler times out or the lease is lost.
        signal: context.signal,
      });
      if (response.status === 402) throw new PermanentError(`card declined: ${await response.text()}`);
      if (response.status === 429 || response.status >= 500) {
        const retryAfter = Number(response.headers.get('retry-after'));
        throw new RetryableError(
          `provider answered ${response.status}`,
          Number.isFinite(retryAfter) && retryAfter > 0 ? { delayMs: retryAfter * 1_000 } : {},
        );
      }
      if (!response.ok)
        throw new PermanentError(`provider refused the charge: ${response.status} ${await response.text()}`);
      const charge = (await response.json()) as ChargeResponse;
      // The completion transaction: this row commits with the inbox row, only if the lease is still ours. The
      // reconciler (payments-reconciler.ts) may have recorded this charge already, from the provider's side,
      // if an earlier attempt charged and died before committing: the payment id is the natural key.
      await insertIfAbsent(context.tx, {
        table: 'payments',
        values: {
          payment_id: payment.paymentId,
          provider_charge_id: charge.id,
          amount_cents: payment.amountCents,
          currency: payment.currency,
          charged_at: new Date(),
        },
        key: ['payment_id'],
      });
    },
  });
}
