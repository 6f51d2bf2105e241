// @inboxkit/sqs: the SQS transport for inboxkit. Deletes a message only after its effect (or its dead letter)
// is durable, keeps long handlers' messages invisible with a heartbeat, and keeps FIFO group order.

export { sqsConsumer } from './sqs-consumer.js';
export { StartTimeoutError } from '@inboxkit/core';
export type { SqsConsumerOptions } from './sqs-consumer-options.js';
export { sqsPublisher } from './sqs-publisher.js';
export type { SqsPublisherOptions } from './sqs-publisher.js';
export type { SqsClient, SqsAdminClient } from './sqs-client.js';
export { redrivePolicyFor } from './redrive-policy.js';
export type { RedrivePolicyOptions } from './redrive-policy.js';
export {
  SQS_ATTRIBUTES,
  encodeMessageAttributes,
  decodeMessageAttributes,
  expandDeadLetterHeaders,
} from './message-attributes.js';
export { isFifoQueue } from './fifo.js';
export { sqsDeadLetterQueue } from './sqs-dead-letter-queue.js';
export type { SqsDeadLetterQueueOptions, SqsDeadLetterEntry } from './sqs-dead-letter-queue.js';
export { sqsDeadLetterQueueDepth, type SqsDeadLetterQueueDepth, type SqsDeadLetterQueueDepthOptions } from './sqs-dead-letter-queue-depth.js';
export { createQueues } from './create-queues.js';
export type { CreateQueuesOptions, CreatedQueues } from './create-queues.js';
