// The deterministic downstream idempotency key handed to handlers, for effects outside the transaction.

import { createHash } from 'node:crypto';

/**
 * A key derived from (consumer, message id) only, the same on every attempt, every process and every
 * replay: SHA-256 of `consumer + "\u0000" + messageId`, formatted as an RFC 9562 version-8 UUID (36
 * characters), which every idempotency-key API accepts (Stripe, Adyen, PayPal, Square's 45-character limit).
 * Pass it as the Idempotency-Key of downstream calls; the downstream's own retention then bounds correctness.
 *
 * @example
 * await payments.charge({ amount }, { idempotencyKey: context.downstreamKey });
 */
export function downstreamKey(consumer: string, messageId: string): string {
  const bytes = createHash('sha256').update(consumer).update('\u0000').update(messageId).digest();
  bytes[6] = (bytes[6]! & 0x0f) | 0x80; // version 8
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
