// The slice of @aws-sdk/client-sqs's `SQSClient` inboxkit calls, declared structurally: the application passes
// its own client (credentials, region, retries, tracing wrappers are its business) and any object with these
// `send` overloads fits.

import type {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityBatchCommandOutput,
  ChangeMessageVisibilityCommand,
  ChangeMessageVisibilityCommandOutput,
  CreateQueueCommand,
  CreateQueueCommandOutput,
  DeleteMessageBatchCommand,
  DeleteMessageBatchCommandOutput,
  DeleteMessageCommand,
  DeleteMessageCommandOutput,
  GetQueueAttributesCommand,
  GetQueueAttributesCommandOutput,
  ReceiveMessageCommand,
  ReceiveMessageCommandOutput,
  SendMessageBatchCommand,
  SendMessageBatchCommandOutput,
  SendMessageCommand,
  SendMessageCommandOutput,
} from '@aws-sdk/client-sqs';

/**
 * What `sqsConsumer`, `sqsPublisher` and `sqsDeadLetterQueue` need from an `SQSClient`.
 *
 * @example
 * import { SQSClient } from '@aws-sdk/client-sqs';
 * const client: SqsClient = new SQSClient({ region: 'eu-west-1' });
 */
export interface SqsClient {
  /** `abortSignal` ends a long poll early (the consumer's `stop()`). */
  send(
    command: ReceiveMessageCommand,
    options?: { readonly abortSignal?: AbortSignal },
  ): Promise<ReceiveMessageCommandOutput>;
  send(command: DeleteMessageBatchCommand): Promise<DeleteMessageBatchCommandOutput>;
  send(command: DeleteMessageCommand): Promise<DeleteMessageCommandOutput>;
  send(command: ChangeMessageVisibilityCommand): Promise<ChangeMessageVisibilityCommandOutput>;
  send(command: ChangeMessageVisibilityBatchCommand): Promise<ChangeMessageVisibilityBatchCommandOutput>;
  send(command: SendMessageCommand): Promise<SendMessageCommandOutput>;
  send(command: SendMessageBatchCommand): Promise<SendMessageBatchCommandOutput>;
  send(command: GetQueueAttributesCommand): Promise<GetQueueAttributesCommandOutput>;
}

/** What `createQueues` needs besides the consumer's slice. */
export type SqsAdminClient = SqsClient & {
  send(command: CreateQueueCommand): Promise<CreateQueueCommandOutput>;
};

/** True for the error SQS returns when a queue URL names no queue. */
export function isQueueDoesNotExist(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { name?: unknown; Code?: unknown; code?: unknown; message?: unknown };
  const names = [e.name, e.Code, e.code].filter((v): v is string => typeof v === 'string');
  return names.some((n) => n === 'QueueDoesNotExist' || n.includes('NonExistentQueue'));
}
