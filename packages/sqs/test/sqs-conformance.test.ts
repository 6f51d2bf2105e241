// The transport conformance suite against ElasticMQ on a standard queue: no ordering promise and a native
// delay (visibility timeout). No delivery count is passed to core: ApproximateReceiveCount counts receives,
// not attempts (the transport records a started attempt before each redelivery instead).

import { describeTransportConformance } from '@inboxkit/testing';

import { sqsHarness } from './sqs-harness.js';

describeTransportConformance(
  'sqs',
  { ordering: 'none', nativeDelay: true, deliveryCount: false, redeliverSpendsCount: true },
  () => sqsHarness(),
  {
    // Above the harness's 2 s visibility timeout, so an unsettled message has time to come back.
    quietPeriodMs: 3_000,
  },
);
