// The transport conformance suite against ElasticMQ on a standard queue in batch mode: each received batch is
// handled by handleBatch() in one transaction, and every outcome is still settled on its own.

import { describeTransportConformance } from '@inboxkit/testing';

import { sqsHarness } from './sqs-harness.js';

describeTransportConformance(
  'sqs batch mode',
  { ordering: 'none', nativeDelay: true, deliveryCount: false, redeliverSpendsCount: true },
  () => sqsHarness({ consumer: { mode: 'batch' } }),
  {
    // Above the harness's 2 s visibility timeout, so an unsettled message has time to come back.
    quietPeriodMs: 3_000,
  },
);
