// The learning transport passes the same conformance suite as Kafka, RabbitMQ and SQS. This is also the
// suite's own smoke test: transport-conformance-catches.test.ts shows it failing on broken transports.

import {
  LEARNING_TRANSPORT_FEATURES,
  describeTransportConformance,
  learningTransportHarness,
} from '../src/index.js';

describeTransportConformance(
  'learning',
  LEARNING_TRANSPORT_FEATURES,
  async () => learningTransportHarness({ visibilityTimeoutMs: 100 }),
  {
    // Longer than the visibility timeout, so a message left unsettled would come back within it.
    quietPeriodMs: 250,
    waitTimeoutMs: 5_000,
  },
);
