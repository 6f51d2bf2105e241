// The shared transport conformance suite through the Nest strategy: RabbitMQ's consumer fed by
// InboxkitTransport, every handler an @EventPattern method of a Nest controller.

import { describeTransportConformance } from '@inboxkit/testing';
import { rabbitmqHarness } from '../../rabbitmq/test/rabbitmq-harness.js';
import { useSharedBroker } from '../../rabbitmq/test/broker-lock.js';
import { nestTransportHarness } from './support/nest-transport-harness.js';

useSharedBroker();

describeTransportConformance(
  'rabbitmq through InboxkitTransport',
  { ordering: 'none', nativeDelay: true, deliveryCount: true },
  async () => nestTransportHarness(await rabbitmqHarness()),
);
