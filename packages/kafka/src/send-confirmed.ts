// "Publish and be sure", written once for Kafka: every produce of this package (dead letters, the publisher,
// replay) waits for acks from all in-sync replicas and turns any failure into a PublishError.

import { PublishError } from '@inboxkit/core';
import type { KafkaOutgoingRecord, KafkaProducerLike } from './kafka-client-types.js';

/** Records grouped by topic, as `sendBatch` takes them. */
export interface TopicRecords {
  readonly topic: string;
  readonly messages: KafkaOutgoingRecord[];
}

/**
 * Produces with `acks: -1` (all in-sync replicas) and resolves only once the broker confirmed every record.
 * Rejects with a `PublishError` (cause: the client's error) otherwise.
 */
export async function sendConfirmed(
  producer: KafkaProducerLike,
  topicMessages: readonly TopicRecords[],
  timeoutMs: number,
): Promise<void> {
  if (topicMessages.length === 0) return;
  // The idempotent producer retries retriable errors without end (a broker that is down): bound the wait
  // locally too, so a caller can give up, leave the source unsettled and try again later.
  const send = producer.sendBatch({ acks: -1, timeout: timeoutMs, topicMessages: [...topicMessages] });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no confirmation within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([send, timedOut]);
  } catch (error) {
    void send.catch(() => undefined);
    const topics = topicMessages.map((t) => t.topic).join(', ');
    const detail = error instanceof Error ? error.message : String(error);
    throw new PublishError(`Kafka did not confirm the produce to ${topics}: ${detail}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}
