// W3C trace context through the Kafka transport on the real broker (test/support/trace-context-checks.ts): the
// producer's trace continues through the consumer, the handler and the DLQ record; kafkaPublisher injects it.
import { kafkaPublisher } from '@inboxkit/kafka';
import { afterAll, beforeAll } from 'vitest';

import { describeTraceContext } from '../../../test/support/trace-context-checks.js';
import { kafkaHarness } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let releaseBroker: (() => void) | undefined;
beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});
afterAll(() => releaseBroker?.());

describeTraceContext('kafka', {
  harness: () => kafkaHarness({ partitions: 1 }),
  publisher: async (harness) => ({
    publisher: kafkaPublisher({ kafka: harness.kafka }),
    destination: harness.topic,
  }),
});
