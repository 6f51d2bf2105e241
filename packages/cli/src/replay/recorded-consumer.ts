// Which consumer a dead letter belongs to, as far as its headers say.

import type { DeadLetterRecord } from '@inboxkit/core';

/**
 * The consumer a dead letter names. `unknown` is what a reader writes for a broker-made dead letter whose
 * consumer it was not told (RabbitMQ's delivery limit): no consumer, so `--consumer` can name it.
 */
export function recordedConsumer(record: DeadLetterRecord | undefined): string | undefined {
  return record === undefined || record.consumer === 'unknown' ? undefined : record.consumer;
}
