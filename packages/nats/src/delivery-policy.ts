// ─── Delivery policy (to move to core's delivery kit) ─────────────────────────────────────────────────────────
// Everything here is transport-neutral: how an outcome maps to a broker action, how long to pause while the
// inbox store is down, and how far above `maxAttempts` the broker's own delivery limit sits. It is kept in this
// one file so that it moves to `@inboxkit/core`'s delivery kit (broker-settlement port, settle(outcome),
// outage policy, backstop formula) as a whole, leaving nats-consumer.ts with the JetStream calls only.

import type { Outcome } from '@inboxkit/core';

/** What the transport does with a delivery once core decided its outcome. */
export type Settlement =
  /** The effect (or the duplicate's absence of one) is durable: acknowledge, confirmed. */
  | { readonly action: 'ack' }
  /** Retry: the broker redelivers after `delayMs`. */
  | { readonly action: 'redeliver'; readonly delayMs: number }
  /** The inbox store is unreachable: keep the message and try again here after a pause (no delivery spent). */
  | { readonly action: 'hold'; readonly delayMs: number }
  /** Publish the dead letter (confirmed), then terminate the delivery. */
  | { readonly action: 'dead-letter' };

/** Longest pause between two tries of a held message while the inbox store is unavailable. */
export const MAX_STORE_PAUSE_MS = 5_000;

/**
 * The settlement of an outcome. `holdRetries` keeps every retry in the process (ordered consumers: a later
 * message of the same subject must not overtake it); `lastDelivery` is true when the broker will not deliver
 * this message again (its delivery limit, the backstop, is reached): a retry then dead-letters instead of being
 * lost silently. `storePauses` is how many holds this delivery already made for an unavailable store.
 */
export function settlementFor(
  outcome: Outcome,
  options: { readonly holdRetries: boolean; readonly lastDelivery: boolean; readonly storePauses: number },
): Settlement {
  switch (outcome.status) {
    case 'processed':
    case 'duplicate':
      return { action: 'ack' };
    case 'dead-letter':
      return { action: 'dead-letter' };
    case 'retry':
      if (outcome.reason === 'store-unavailable') {
        return { action: 'hold', delayMs: Math.min(MAX_STORE_PAUSE_MS, 100 * 2 ** Math.min(options.storePauses, 6)) };
      }
      if (options.holdRetries) return { action: 'hold', delayMs: outcome.delayMs };
      if (options.lastDelivery) return { action: 'dead-letter' };
      return { action: 'redeliver', delayMs: outcome.delayMs };
  }
}

/**
 * The broker's delivery limit (JetStream `max_deliver`) for a consumer that dead-letters after `maxAttempts`:
 * the backstop that ends a message nothing else could (a process that dies on it before anything is recorded).
 * It sits well above `maxAttempts`, because deliveries also rise without an attempt: a redelivery after a crash
 * or a stop, a failed dead-letter publish. Twice the attempts plus 10.
 */
export function backstopDeliveries(maxAttempts: number): number {
  return maxAttempts * 2 + 10;
}

/** The reason a dead letter carries when the broker's delivery limit, not `maxAttempts`, ended the message. */
export const MAX_DELIVERIES_REASON = 'max-deliveries';
// ─── end of the delivery policy ─────────────────────────────────────────────────────────────────────────────────
