// W3C trace context through the SQS transport on ElasticMQ (test/support/trace-context-checks.ts): the
// producer's trace continues through the consumer, the handler and the DLQ message; sqsPublisher injects it.
import { sqsPublisher } from '@inboxkit/sqs';

import { describeTraceContext } from '../../../test/support/trace-context-checks.js';
import { sqsHarness } from './sqs-harness.js';

describeTraceContext('sqs', {
  harness: () => sqsHarness(),
  publisher: async (harness) => ({
    publisher: sqsPublisher({ client: harness.client }),
    destination: harness.queues.queueUrl,
  }),
});
