// The deterministic downstream idempotency keys handed to handlers, for effects outside the transaction.

import { createHash, type Hash } from 'node:crypto';
import { ConfigurationError } from './errors.js';

/** The longest step name `downstreamStepKey` accepts, in UTF-16 code units. */
export const MAX_DOWNSTREAM_STEP_LENGTH = 100;

/**
 * A key derived from (consumer, message id) only, the same on every attempt, every process and every
 * replay: SHA-256 of `consumer + "\u0000" + messageId`, formatted as an RFC 9562 version-8 UUID (36
 * characters), which every idempotency-key API accepts (Stripe, Adyen, PayPal, Square's 45-character limit).
 * Pass it as the Idempotency-Key of downstream calls; the downstream's own retention then bounds correctness.
 * A handler that makes more than one call to the same downstream needs one key per call: see
 * `downstreamStepKey` (`context.downstreamKeyFor(step)` in a handler).
 *
 * @example
 * await payments.charge({ amount }, { idempotencyKey: context.downstreamKey });
 */
export function downstreamKey(consumer: string, messageId: string): string {
  return asUuid(createHash('sha256').update(consumer).update('\u0000').update(messageId));
}

/**
 * The key of one named step of a handler: derived from (consumer, message id, step) only, so it is the same on
 * every attempt, every process and every replay, and different for every step and from `downstreamKey`. Same
 * 36-character UUID form. Use one step name per downstream call (`'charge'`, `'refund-fee'`): a provider that
 * remembers a key refuses it for a different request (Stripe) or silently answers the first response again,
 * so a second call under the same key never takes effect.
 *
 * The step must be 1-100 characters without control characters, else a `ConfigurationError` (not retriable:
 * thrown in a handler, the message is dead-lettered with that reason and can be replayed once the code is fixed).
 * Steps are case- and space-sensitive: `'charge'` and `'Charge'` are different keys.
 *
 * @example
 * await psp.charge({ amount }, { idempotencyKey: downstreamStepKey('billing', message.id, 'charge') });
 * await psp.refund({ fee }, { idempotencyKey: downstreamStepKey('billing', message.id, 'refund-fee') });
 */
export function downstreamStepKey(consumer: string, messageId: string, step: string): string {
  assertStepName(step);
  // The input starts with NUL, which a consumer name (1-200 printable characters) never does, so no step key
  // equals a `downstreamKey`; each field is length-prefixed, so no two (consumer, message id, step) share one.
  const hash = createHash('sha256').update('\u0000inboxkit-step\u0000');
  for (const field of [consumer, messageId, step]) hash.update(`${Buffer.byteLength(field)}:`).update(field);
  return asUuid(hash);
}

// eslint-disable-next-line no-control-regex -- the control characters are what is refused
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function assertStepName(step: unknown): asserts step is string {
  if (
    typeof step !== 'string' ||
    step.length === 0 ||
    step.length > MAX_DOWNSTREAM_STEP_LENGTH ||
    CONTROL.test(step)
  ) {
    const shown =
      typeof step === 'string'
        ? JSON.stringify(step.length > 120 ? `${step.slice(0, 120)}…` : step)
        : String(step);
    throw new ConfigurationError(
      `a downstream step name must be a string of 1-${MAX_DOWNSTREAM_STEP_LENGTH} characters without control characters, such as 'charge' or 'refund-fee', got ${shown}${typeof step === 'string' ? ` (${step.length} characters)` : ` (${typeof step})`}`,
    );
  }
}

function asUuid(hash: Hash): string {
  const bytes = hash.digest();
  bytes[6] = (bytes[6]! & 0x0f) | 0x80; // version 8
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
