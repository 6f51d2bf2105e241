// The learning broker's DLQ behind the DeadLetterQueueReader port, so the CLI's `dlq list` / `dlq replay`
// code (and a demo) runs against the learning transport as against a real broker.

import type { DeadLetterEntry, DeadLetterQueueReader, TakenDeadLetter } from '@inboxkit/core';

import type { LearningBroker } from './learning-broker.js';

/**
 * Reads `broker`'s DLQ. Browsing is non-destructive; a taken entry leaves the DLQ on `remove()` and stays
 * on `release()`.
 *
 * @example
 * const reader = learningDeadLetterReader(transport.broker);
 * for await (const entry of reader.browse({ limit: 10 })) console.log(entry.id, entry.headers['x-inboxkit-reason']);
 */
export function learningDeadLetterReader(broker: LearningBroker): DeadLetterQueueReader {
  return {
    nonDestructiveBrowse: true,
    async *browse({ limit }): AsyncIterable<DeadLetterEntry> {
      yield* broker.deadLetters().slice(0, limit);
    },
    async *take({ limit }): AsyncIterable<TakenDeadLetter> {
      for (const entry of broker.deadLetters().slice(0, limit)) {
        yield {
          ...entry,
          remove: async () => {
            broker.removeDeadLetter(entry.position);
          },
          release: async () => undefined,
        };
      }
    },
    async close() {},
  };
}
