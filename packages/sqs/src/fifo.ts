// FIFO queue helpers: recognising a FIFO queue and deriving group and deduplication ids SQS accepts.

import { createHash } from 'node:crypto';

/** True when the queue URL (or ARN, or name) names a FIFO queue: SQS requires the `.fifo` suffix. */
export function isFifoQueue(queueUrlOrName: string): boolean {
  return queueUrlOrName.endsWith('.fifo');
}

const FIFO_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * A MessageGroupId or MessageDeduplicationId for these parts: the single part itself when SQS accepts it
 * (1–128 printable ASCII characters), otherwise the SHA-256 hex of all parts.
 */
export function fifoId(...parts: readonly string[]): string {
  if (parts.length === 1 && FIFO_ID.test(parts[0]!)) return parts[0]!;
  return createHash('sha256').update(parts.join('\u0000')).digest('hex');
}
