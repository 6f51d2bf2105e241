// @inboxkit/kafka: kafkajs transport for inboxkit: commit offsets only after durable work.

export { kafkaConsumer } from './kafka-consumer.js';
export { StartTimeoutError } from '@inboxkit/core';
export type { KafkaTransportConsumer } from './kafka-consumer.js';
export type {
  KafkaConsumerOptions,
  ResolvedKafkaConsumerOptions,
  TombstonePolicy,
} from './kafka-consumer-options.js';
export { kafkaPublisher } from './kafka-publisher.js';
export type { KafkaPublisherOptions } from './kafka-publisher.js';
export { kafkaDeadLetterQueue } from './kafka-dead-letter-queue.js';
export type {
  KafkaDeadLetterEntry,
  KafkaDeadLetterQueueOptions,
  KafkaDeadLetterQueueReader,
  KafkaTakenDeadLetter,
} from './kafka-dead-letter-queue.js';
export type { ReaderConsumerConfig } from './topic-reader.js';
export type { KafkaRecord } from './to-inbound-message.js';
export type * from './kafka-client-types.js';
export { platformaticKafka, platformaticProducer, platformaticAdmin } from './platformatic/platformatic-kafka.js';
export type { PlatformaticKafkaOptions } from './platformatic/platformatic-kafka.js';
export { platformaticConsumer } from './platformatic/platformatic-consumer.js';
export type { PlatformaticConsumerAdapterOptions } from './platformatic/platformatic-consumer.js';
export type * from './platformatic/platformatic-types.js';
