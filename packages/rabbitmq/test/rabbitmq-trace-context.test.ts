// W3C trace context through the RabbitMQ transport on the real broker (test/support/trace-context-checks.ts):
// the producer's trace continues through the consumer, the handler and the DLQ copy; rabbitmqPublisher injects it.
import { rabbitmqPublisher } from '@inboxkit/rabbitmq';

import { describeTraceContext } from '../../../test/support/trace-context-checks.js';
import { useSharedBroker } from './broker-lock.js';
import { rabbitmqHarness } from './rabbitmq-harness.js';

useSharedBroker();

describeTraceContext('rabbitmq', {
  harness: () => rabbitmqHarness(),
  publisher: async (harness) => ({
    publisher: rabbitmqPublisher({ channel: await harness.admin.createConfirmChannel() }),
    destination: '', // the default exchange routes by queue name
    routingKey: harness.queue,
  }),
});
