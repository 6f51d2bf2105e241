// The transport conformance suite against the real Kafka broker: per-partition (key) order, no native delay
// (retries pause and seek), no broker delivery count (attempts are recorded by core): the features the
// transport declares to the delivery kit (KAFKA_FEATURES).
import { describeTransportConformance } from '@inboxkit/testing';
import { afterAll, beforeAll } from 'vitest';

import { KAFKA_FEATURES } from '../src/kafka-settlement.js';
import { kafkaHarness } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let releaseBroker: (() => void) | undefined;
beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});
afterAll(() => releaseBroker?.());

describeTransportConformance(
  'kafka',
  KAFKA_FEATURES,
  () => kafkaHarness(),
  {
    quietPeriodMs: 1_500,
  },
);

describeTransportConformance(
  'kafka, batch mode',
  KAFKA_FEATURES,
  () => kafkaHarness({ transport: { mode: 'batch' } }),
  { quietPeriodMs: 1_500 },
);

describeTransportConformance(
  'kafka, 4 keys at once per partition',
  KAFKA_FEATURES,
  () => kafkaHarness({ transport: { keyConcurrency: 4 } }),
  { quietPeriodMs: 1_500 },
);
