// The shared transport conformance suite, run against the real RabbitMQ: no ordering promise (a retry goes
// through a delay queue), a native delay (delay queues), and a delivery count (attempt header + quorum
// x-delivery-count).

import { describeTransportConformance } from '@inboxkit/testing';
import { rabbitmqHarness } from './rabbitmq-harness.js';
import { useSharedBroker } from './broker-lock.js';

useSharedBroker();

describeTransportConformance(
  'rabbitmq',
  { ordering: 'none', nativeDelay: true, deliveryCount: true, redeliverSpendsCount: false },
  () => rabbitmqHarness(),
);

// The same guarantees when waiting messages are claimed and applied in one inbox transaction per batch.
describeTransportConformance(
  'rabbitmq, batches of up to 8',
  { ordering: 'none', nativeDelay: true, deliveryCount: true, redeliverSpendsCount: false },
  () => rabbitmqHarness({ consumer: { maxBatchSize: 8 } }),
);
