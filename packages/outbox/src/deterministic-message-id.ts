// A downstream message id derived from what the handler consumed, for handlers that must emit the same id on
// every attempt (so a re-run that enqueues again is deduplicated downstream rather than doubled).

import { createHash } from 'node:crypto';

/**
 * SHA-256 of `consumer \0 incomingId \0 step`, formatted as an RFC 9562 version-8 UUID: the same on every
 * attempt, process and replay. Use a distinct `step` per message a handler emits.
 *
 * @example
 * await enqueue(context.tx, { publisher: 'kafka', destination: 'orders.created', body,
 *   id: deterministicMessageId(context.consumer, message.id, 'created') });
 */
export function deterministicMessageId(consumer: string, incomingId: string, step: string | number): string {
  const bytes = createHash('sha256')
    .update(consumer)
    .update('\u0000')
    .update(incomingId)
    .update('\u0000')
    .update(String(step))
    .digest();
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
