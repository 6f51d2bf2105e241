// The transport conformance suite against ElasticMQ on a standard queue: no ordering promise, a native delay
// (visibility timeout) and a delivery count (ApproximateReceiveCount).

import { describeTransportConformance } from '@inboxkit/testing';

import { sqsHarness } from './sqs-harness.js';

describeTransportConformance(
  'sqs',
  { ordering: 'none', nativeDelay: true, deliveryCount: true },
  () => sqsHarness(),
  {
    // Above the harness's 2 s visibility timeout, so an unsettled message has time to come back.
    quietPeriodMs: 3_000,
  },
);
