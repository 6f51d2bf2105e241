// The TransportHarness of the learning transport: lets the transport conformance suite check the learning
// transport exactly as it checks Kafka, RabbitMQ and SQS (and shows transport authors a complete harness).

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';

import { LearningBroker } from './learning-broker.js';
import { LearningTransport } from './learning-transport.js';
import type {
  HarnessConsumerOptions,
  HarnessMessage,
  TransportFeatures,
  TransportHarness,
} from './transport-harness.js';
import { uniqueName } from './unique-name.js';

/** What the learning transport guarantees: per-key order, a native delay and a delivery count. */
export const LEARNING_TRANSPORT_FEATURES: TransportFeatures = Object.freeze({
  ordering: 'key',
  nativeDelay: true,
  deliveryCount: true,
});

/** Options of `learningTransportHarness`. */
export interface LearningTransportHarnessOptions {
  /** Visibility timeout of the harness's broker: how soon a crashed delivery comes back. Default is 200 ms. */
  readonly visibilityTimeoutMs?: number;
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
    async crash() {
      broker.crash();
    },
    async dispose() {
      await Promise.all([...consumers].map((c) => c.stop()));
      broker.close();
    },
  };
}
