// The transport conformance suite on the real Kafka with @platformatic/kafka in place of kafkajs: the same
// suite and capabilities as kafka-conformance.test.ts, every client created by platformaticKafka().
import { describeTransportConformance } from '@inboxkit/testing';
import { afterAll, beforeAll } from 'vitest';

import { platformaticHarness } from './platformatic-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let releaseBroker: (() => void) | undefined;
beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});
afterAll(() => releaseBroker?.());

describeTransportConformance(
  'kafka on @platformatic/kafka',
  { ordering: 'key', nativeDelay: false, deliveryCount: false },
  () => platformaticHarness(),
  { quietPeriodMs: 1_500 },
);

describeTransportConformance(
  'kafka on @platformatic/kafka, batch mode',
  { ordering: 'key', nativeDelay: false, deliveryCount: false },
  () => platformaticHarness({ transport: { mode: 'batch' } }),
  { quietPeriodMs: 1_500 },
);
