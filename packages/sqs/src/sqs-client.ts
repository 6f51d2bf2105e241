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

/** Per-call options inboxkit passes: only an abort signal, to end a long poll on `stop()`. */
export interface SqsSendOptions {
  readonly abortSignal?: AbortSignal;
}

/**
 * What `sqsConsumer`, `sqsPublisher` and `sqsDeadLetterQueue` need from an `SQSClient`.
 *
 * @example
 * import { SQSClient } from '@aws-sdk/client-sqs';
 * const client: SqsClient = new SQSClient({ region: 'eu-west-1' });
 */
export interface SqsClient {
  send(command: ReceiveMessageCommand, options?: SqsSendOptions): Promise<ReceiveMessageCommandOutput>;
  send(command: DeleteMessageBatchCommand, options?: SqsSendOptions): Promise<DeleteMessageBatchCommandOutput>;
  send(command: DeleteMessageCommand, options?: SqsSendOptions): Promise<DeleteMessageCommandOutput>;
  send(command: ChangeMessageVisibilityCommand, options?: SqsSendOptions): Promise<ChangeMessageVisibilityCommandOutput>;
  send(
    command: ChangeMessageVisibilityBatchCommand,
    options?: SqsSendOptions,
  ): Promise<ChangeMessageVisibilityBatchCommandOutput>;
  send(command: SendMessageCommand, options?: SqsSendOptions): Promise<SendMessageCommandOutput>;
  send(command: SendMessageBatchCommand, options?: SqsSendOptions): Promise<SendMessageBatchCommandOutput>;
  send(command: GetQueueAttributesCommand, options?: SqsSendOptions): Promise<GetQueueAttributesCommandOutput>;
}

/** What `createQueues` needs besides the consumer's slice. */
export type SqsAdminClient = SqsClient & {
  send(command: CreateQueueCommand, options?: SqsSendOptions): Promise<CreateQueueCommandOutput>;
};

/** True for the error SQS returns when a queue URL names no queue. */
export function isQueueDoesNotExist(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { name?: unknown; Code?: unknown; code?: unknown; message?: unknown };
  const names = [e.name, e.Code, e.code].filter((v): v is string => typeof v === 'string');
  return names.some((n) => n === 'QueueDoesNotExist' || n.includes('NonExistentQueue'));
}
