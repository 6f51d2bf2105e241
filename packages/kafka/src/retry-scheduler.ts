// Redelivers a record of Kafka later without blocking anything: pause its partition, seek back to it, and
// resume after the delay from a timer outside eachBatch. Order is kept (nothing behind it in the partition
// runs first), other partitions keep flowing, and no handler call sleeps past the session timeout.

import type { Logger } from '@inboxkit/core';
import type { KafkaConsumerLike } from './kafka-client-types.js';

/** Pauses, seeks and resumes partitions of one consumer; `cancel()` drops the pending resumes at stop. */
export class RetryScheduler {
  readonly #consumer: KafkaConsumerLike;
  readonly #logger: Logger;
  readonly #timers = new Set<NodeJS.Timeout>();
  #cancelled = false;

  constructor(consumer: KafkaConsumerLike, logger: Logger) {
    this.#consumer = consumer;
    this.#logger = logger;
  }

  /**
   * The next fetch of the partition starts at `offset`, no sooner than `delayMs` from now. Call from inside
   * eachBatch (the partition must be assigned), then return without resolving `offset`.
   */
  redeliver(topic: string, partition: number, offset: string, delayMs: number): void {
    const partitions = [{ topic, partitions: [partition] }];
    if (delayMs > 0) this.#consumer.pause(partitions);
    this.#consumer.seek({ topic, partition, offset });
    if (delayMs <= 0) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.#cancelled) return;
      try {
        this.#consumer.resume(partitions);
      } catch (error) {
        // The consumer stopped meanwhile: nothing to resume.
        this.#logger.debug({ err: error, topic, partition }, 'inboxkit: could not resume a partition');
      }
    }, delayMs);
    this.#timers.add(timer);
  }

  /** Drops every pending resume (the consumer is stopping). */
  cancel(): void {
    this.#cancelled = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}
