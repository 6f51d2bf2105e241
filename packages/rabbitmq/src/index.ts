// @inboxkit/rabbitmq: amqplib transport for inboxkit: ack after commit, delays and DLQ that lose nothing.

export { rabbitmqConsumer } from './rabbitmq-consumer.js';
export { StartTimeoutError } from '@inboxkit/core';
export type {
  RabbitmqConsumerHandler,
  RabbitmqConsumerOptions,
  RabbitmqTopologySettings,
} from './rabbitmq-consumer.js';
export { rabbitmqPublisher } from './rabbitmq-publisher.js';
export type { RabbitmqPublisherOptions } from './rabbitmq-publisher.js';
export { rabbitmqDeadLetterQueue } from './rabbitmq-dead-letter-queue.js';
export type { RabbitmqDeadLetterQueueOptions } from './rabbitmq-dead-letter-queue.js';
export { rabbitmqDeadLetterQueueDepth, type RabbitmqDeadLetterQueueDepth, type RabbitmqDeadLetterQueueDepthOptions } from './rabbitmq-dead-letter-queue-depth.js';
export {
  declareTopology,
  topologyNames,
  DEFAULT_DELAY_BUCKETS_MS,
  DEFAULT_DELIVERY_LIMIT,
} from './declare-topology.js';
export type { DeclaredTopology, TopologyNames, TopologyOptions } from './declare-topology.js';
export type {
  AmqpChannel,
  AmqpConfirmChannel,
  AmqpConnection,
  AmqpMessage,
  AmqpMessageFields,
  AmqpMessageProperties,
  AmqpPublishOptions,
} from './amqp-types.js';
