// The transport conformance suite against ElasticMQ on a FIFO queue: order per message group (the suite's
// key), also across a retry.

import { describeTransportConformance } from '@inboxkit/testing';

import { sqsHarness } from './sqs-harness.js';

describeTransportConformance(
  'sqs fifo',
  { ordering: 'key', nativeDelay: true, deliveryCount: false, redeliverSpendsCount: true },
  () => sqsHarness({ fifo: true }),
  {
    // Above the harness's 2 s visibility timeout, so an unsettled message has time to come back.
    quietPeriodMs: 3_000,
  },
);
