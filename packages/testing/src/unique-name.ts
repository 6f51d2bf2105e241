// Collision-free names for the topics, queues and consumer groups a test creates, so parallel test files and
// repeated runs against the same broker never see each other's messages.

import { randomBytes } from 'node:crypto';

/** The longest name `uniqueName` returns: SQS's limit, the tightest of Kafka (249), AMQP (255) and SQS (80). */
export const UNIQUE_NAME_MAX_LENGTH = 80;

let counter = 0;

/**
 * Returns `<prefix>-<time>-<counter>-<random>`, unique within the process (a counter) and across processes and
 * runs (time and 40 random bits). The result is at most 80 characters of `[A-Za-z0-9_-]`, so it is a valid
 * Kafka topic, Kafka group id, AMQP queue or exchange name and SQS standard queue name; append `.fifo`
 * yourself for an SQS FIFO queue (the name leaves room for it). Characters outside that set in `prefix` become
 * `-`, and a long prefix is cut. Default prefix is `inboxkit`.
 *
 * @example
 * const topic = uniqueName('payments'); // 'payments-m3x1q2a-7-9f3c1a0b2e'
 */
export function uniqueName(prefix = 'inboxkit'): string {
  counter += 1;
  const suffix = `${Date.now().toString(36)}-${counter.toString(36)}-${randomBytes(5).toString('hex')}`;
  // Room for the suffix, the dash before it, and a later `.fifo` (5 characters).
  const room = UNIQUE_NAME_MAX_LENGTH - suffix.length - 1 - 5;
  const clean = prefix.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, Math.max(0, room));
  return clean === '' ? suffix : `${clean}-${suffix}`;
}
