// The TransportHarness of the learning transport: lets the transport conformance suite check the learning
// transport exactly as it checks Kafka, RabbitMQ and SQS (and shows transport authors a complete harness).

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';

import { LearningBroker } from './learning-broker.js';
import { LearningTransport } from './learning-transport.js';
export { LEARNING_TRANSPORT_FEATURES } from './learning-settlement.js';
import type { HarnessConsumerOptions, HarnessMessage, TransportHarness } from './transport-harness.js';
import { uniqueName } from './unique-name.js';

/** Options of `learningTransportHarness`. */
export interface LearningTransportHarnessOptions {
  /** Visibility timeout of the harness's broker: how soon a crashed delivery comes back. Default is 200 ms. */
  readonly visibilityTimeoutMs?: number;
  /**
   * The DLQ's size limit (`LearningBrokerOptions.maxDeadLetterBytes`). Default is 13,000 bytes: the
   * `oversizedDeadLetter` message's full dead letter is over it, its compact form under it.
   */
  readonly maxDeadLetterBytes?: number;
}

/** A TransportHarness over a fresh `LearningBroker`. `crash()` is the broker's `crash()`. */
export interface LearningTransportHarness extends TransportHarness {
  readonly broker: LearningBroker;
}

/**
 * Builds a harness over a new learning broker (one queue and its DLQ), for `describeTransportConformance`.
 *
 * @example
 * describeTransportConformance('learning', LEARNING_TRANSPORT_FEATURES, async () => learningTransportHarness());
 */
export function learningTransportHarness(
  options: LearningTransportHarnessOptions = {},
): LearningTransportHarness {
  const broker = new LearningBroker({
    name: uniqueName('conformance'),
    visibilityTimeoutMs: options.visibilityTimeoutMs ?? 200,
    maxDeadLetterBytes: options.maxDeadLetterBytes ?? 13_000,
  });
  const consumers = new Set<TransportConsumer>();
  return {
    broker,
    async startConsumer(
      consumer: IdempotentConsumer<unknown, unknown>,
      consumerOptions: HarnessConsumerOptions = {},
    ) {
      const transport = new LearningTransport({
        consumer,
        broker,
        ...(consumerOptions.concurrency !== undefined ? { concurrency: consumerOptions.concurrency } : {}),
        ...(consumerOptions.closeTimeoutMs !== undefined
          ? { closeTimeoutMs: consumerOptions.closeTimeoutMs }
          : {}),
      });
      await transport.start();
      consumers.add(transport);
      return transport;
    },
    async publish(messages: readonly HarnessMessage[]) {
      await broker.send(messages);
    },
    async readDeadLetters(count: number, timeoutMs: number): Promise<DeadLetterEntry[]> {
      // The contract returns what the DLQ holds after the timeout rather than rejecting.
      return broker.waitForDeadLetters(count, { timeoutMs }).catch(() => broker.deadLetters());
    },
    oversizedDeadLetter(id: string): HarnessMessage {
      // 10,000 bytes of headers: with a 2,000-character error and its stack the full dead letter is over
      // 13,000 bytes; without the stack and with 500 characters of the message (compact) it is under.
      const headers = { 'x-bulk-0': 'b'.repeat(5_000), 'x-bulk-1': 'b'.repeat(5_000) };
      return { id, body: JSON.stringify({ kind: 'oversized' }), headers };
    },
    async crash() {
      broker.crash();
    },
    async dispose() {
      await Promise.all([...consumers].map((c) => c.stop()));
      broker.close();
    },
  };
}
