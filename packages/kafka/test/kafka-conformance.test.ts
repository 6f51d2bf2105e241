// The transport conformance suite against the real Kafka broker: per-partition (key) order, no native delay
// (retries pause and seek), no broker delivery count (attempts are recorded by core): the features the
// transport declares to the delivery kit (KAFKA_FEATURES). Each variant runs on each Kafka client: kafkajs and
// @platformatic/kafka (platformaticKafka()).
import { describeTransportConformance } from '@inboxkit/testing';
import { afterAll, beforeAll } from 'vitest';

import { KAFKA_FEATURES } from '../src/kafka-settlement.js';
import { KAFKA_TEST_CLIENTS, kafkaHarness } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let releaseBroker: (() => void) | undefined;
beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});
afterAll(() => releaseBroker?.());

for (const client of KAFKA_TEST_CLIENTS) {
  const on = client === 'kafkajs' ? '' : ' on @platformatic/kafka';
  describeTransportConformance(`kafka${on}`, KAFKA_FEATURES, () => kafkaHarness({ client }), {
    quietPeriodMs: 1_500,
  });

  describeTransportConformance(
    `kafka${on}, batch mode`,
    KAFKA_FEATURES,
    () => kafkaHarness({ client, transport: { mode: 'batch' } }),
    { quietPeriodMs: 1_500 },
  );

  describeTransportConformance(
    `kafka${on}, 4 keys at once per partition`,
    KAFKA_FEATURES,
    () => kafkaHarness({ client, transport: { keyConcurrency: 4 } }),
    { quietPeriodMs: 1_500 },
  );
}
