// The shared transport conformance suite through InboxkitTransport for SQS (ElasticMQ) and Kafka: the same
// strategy, their consumers' public factories behind it, every handler an @EventPattern method.

import { describeTransportConformance } from '@inboxkit/testing';
import { afterAll, beforeAll } from 'vitest';
import { sqsHarness } from '../../sqs/test/sqs-harness.js';
import { kafkaHarness } from '../../kafka/test/kafka-harness.js';
import { holdBrokerShared } from '../../kafka/test/support/broker-lock.js';
import { nestTransportHarness } from './support/nest-transport-harness.js';

let releaseBroker: (() => void) | undefined;
beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});
afterAll(() => releaseBroker?.());

describeTransportConformance(
  'sqs through InboxkitTransport',
  { ordering: 'none', nativeDelay: true, deliveryCount: false },
  async () => nestTransportHarness(await sqsHarness()),
  // Above the harness's 2 s visibility timeout, so an unsettled message has time to come back.
  { quietPeriodMs: 3_000 },
);

describeTransportConformance(
  'kafka through InboxkitTransport',
  { ordering: 'key', nativeDelay: false, deliveryCount: false },
  async () => nestTransportHarness(await kafkaHarness()),
  { quietPeriodMs: 1_500 },
);
