// @inboxkit/nats: the NATS JetStream transport for inboxkit. Acknowledges a message only after its effect (or
// its dead letter) is durable, retries with nak(delay), keeps long handlers' messages with working(), and
// publishes with JetStream's acknowledgement.

export { natsConsumer } from './nats-consumer.js';
export type { NatsConsumerOptions } from './nats-consumer.js';
export { natsPublisher, NATS_TIMESTAMP_HEADER, msgIdOf } from './nats-publisher.js';
export type { NatsPublisherOptions } from './nats-publisher.js';
export { natsDeadLetterQueue } from './nats-dead-letter-queue.js';
export type { NatsDeadLetterQueueOptions } from './nats-dead-letter-queue.js';
export { ensureStreams } from './ensure-streams.js';
export type { EnsureStreamsOptions } from './ensure-streams.js';
export { natsMessageId, NATS_TRANSPORT } from './to-inbound-message.js';
export { NATS_MSG_ID_HEADER } from './nats-headers.js';
export { NATS_FEATURES, MAX_DELIVERIES_REASON } from './nats-consumer.js';
