// The webhooks consumer, persist-first: in one transaction with the inbox row, it first stores the provider's
// event exactly as it came, then acts on it. The inbox key is the provider's event id (read from the body by
// the SQS transport), so the provider's retries, which arrive as new SQS messages with new SQS MessageIds,
// are duplicates of one event.

import { idempotentConsumer, PermanentError } from '@inboxkit/core';
import { applyIfNewer } from '@inboxkit/core/patterns';
import type { IdempotentConsumer, InboxStore, Logger, OutcomeEvent } from '@inboxkit/core';
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import { z } from 'zod';

/** The service's tables. */
export interface WebhooksDatabase {
  webhook_events: {
    event_id: string;
    type: string;
    payload: string;
    sqs_message_id: string | null;
    received_at: Date;
  };
  invoices: {
    invoice_id: string;
    customer: string;
    amount_cents: number;
    status: string;
    last_event_at: Date;
  };
}

/** Creates the tables (idempotent; a real service keeps these in its own migrations). */
export async function createWebhookTables(db: Kysely<WebhooksDatabase>): Promise<void> {
  // Every event the provider sent, as sent: replays, audits and fixes start from here.
  await sql`
    CREATE TABLE IF NOT EXISTS webhook_events (
      event_id text PRIMARY KEY,
      type text NOT NULL,
      payload jsonb NOT NULL,
      sqs_message_id text,
      received_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS invoices (
      invoice_id text PRIMARY KEY,
      customer text NOT NULL,
      amount_cents integer NOT NULL,
      status text NOT NULL,
      last_event_at timestamptz NOT NULL
    )`.execute(db);
}

/** A provider event: an id, a type, when it happened, and the object it is about. */
export const providerEvent = z.object({
  id: z.string().min(1),
  type: z.string().min(1),
  /** Unix seconds. */
  created: z.number().int().positive(),
  data: z.object({ object: z.record(z.string(), z.unknown()) }),
});
export type ProviderEvent = z.output<typeof providerEvent>;

const invoice = z.object({
  id: z.string().min(1),
  customer: z.string().min(1),
  amount_due: z.number().int().nonnegative(),
  status: z.enum(['draft', 'open', 'paid', 'void', 'uncollectible']),
});

/** Event types this service acts on; the others are stored and not acted on. */
const INVOICE_EVENTS = new Set(['invoice.created', 'invoice.finalized', 'invoice.paid', 'invoice.voided']);

/** Options of `webhooksConsumer`. */
export interface WebhooksConsumerOptions {
  readonly store: InboxStore<Transaction<WebhooksDatabase>>;
  readonly backoff?: { readonly initialDelayMs?: number; readonly jitter?: 'full' | 'none' };
  readonly logger?: Logger;
  readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
  /** Called for an event older than the invoice's last applied one: stored, not applied. */
  readonly onStale?: (event: { readonly eventId: string; readonly invoiceId: string }) => void;
}

/** Builds the consumer. Its name, `provider-webhooks`, scopes deduplication: never rename it. */
export function webhooksConsumer(
  options: WebhooksConsumerOptions,
): IdempotentConsumer<ProviderEvent, Transaction<WebhooksDatabase>> {
  return idempotentConsumer<ProviderEvent, Transaction<WebhooksDatabase>>({
    name: 'provider-webhooks',
    store: options.store,
    schema: providerEvent,
    // Providers keep retrying a webhook for days (Stripe: 3 days): the dedupe window must outlast that.
    dedupeWindowMs: 14 * 24 * 3_600_000,
    ...(options.backoff !== undefined ? { backoff: options.backoff } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.onOutcome !== undefined ? { hooks: { onOutcome: options.onOutcome } } : {}),
    handler: async (message, { tx, logger }) => {
      const event = message.payload;
      // 1. Persist first: the raw event, whatever happens next.
      await tx
        .insertInto('webhook_events')
        .values({
          event_id: event.id,
          type: event.type,
          payload: JSON.stringify(event),
          sqs_message_id: message.source.brokerMessageId ?? null,
          received_at: new Date(),
        })
        .execute();
      // 2. Then act.
      if (!INVOICE_EVENTS.has(event.type)) {
        logger.info({ eventId: event.id, type: event.type }, 'webhooks: stored, not acted on');
        return;
      }
      const parsed = invoice.safeParse(event.data.object);
      // Rolls back the stored event too: a dead letter keeps the body, and a replay after the fix stores it.
      if (!parsed.success)
        throw new PermanentError(`${event.type} ${event.id} has no valid invoice: ${parsed.error.message}`);
      const at = new Date(event.created * 1_000);
      // Webhooks arrive out of order: an event older than the last one applied to the invoice changes nothing
      // (applyIfNewer: one upsert whose update runs only when last_event_at is older than this event's time).
      const applied = await applyIfNewer(tx, {
        table: 'invoices',
        key: { invoice_id: parsed.data.id },
        version: { column: 'last_event_at', value: at },
        values: {
          customer: parsed.data.customer,
          amount_cents: parsed.data.amount_due,
          status: parsed.data.status,
        },
      });
      if (!applied.applied) {
        logger.info(
          { eventId: event.id, invoice: parsed.data.id },
          'webhooks: older than the invoice, not applied',
        );
        options.onStale?.({ eventId: event.id, invoiceId: parsed.data.id });
      }
    },
  });
}
