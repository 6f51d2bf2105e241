// Creates a source queue and its dead-letter queue wired the way sqsConsumer expects: the DLQ keeps messages
// for the longest retention SQS allows, and the source's redrive policy sits above maxAttempts. For tests,
// examples and first setups; production queues usually come from infrastructure code, with the same settings.

import { CreateQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { redrivePolicyFor } from './redrive-policy.js';
import type { SqsAdminClient } from './sqs-client.js';

/** Options of `createQueues`. */
export interface CreateQueuesOptions {
  readonly client: SqsAdminClient;
  /** Source queue name without `.fifo`; the DLQ is `<name>-dlq`. */
  readonly name: string;
  /** Create FIFO queues (`.fifo` names). Default is false. */
  readonly fifo?: boolean;
  /** The consumer's `maxAttempts`; the redrive policy's `maxReceiveCount` sits above it. Default is 5. */
  readonly maxAttempts?: number;
  /** Receives beyond `maxAttempts` before SQS redrives on its own. Default is `max(5, maxAttempts)`. */
  readonly headroom?: number;
  /** The source queue's default visibility timeout, in seconds. Default is 30. */
  readonly visibilityTimeoutSeconds?: number;
}

/** The URLs (and DLQ ARN) of the created queues. */
export interface CreatedQueues {
  readonly queueUrl: string;
  readonly deadLetterQueueUrl: string;
  readonly deadLetterQueueArn: string;
}

const FOURTEEN_DAYS_SECONDS = 14 * 24 * 3600;

/**
 * Creates (or finds, CreateQueue is idempotent for equal attributes) a queue and its DLQ with a redrive
 * policy from `redrivePolicyFor`.
 *
 * @example
 * const { queueUrl, deadLetterQueueUrl } = await createQueues({ client, name: 'orders', maxAttempts: 5 });
 */
export async function createQueues(options: CreateQueuesOptions): Promise<CreatedQueues> {
  const { client, name } = options;
  const fifo = options.fifo ?? false;
  const suffix = fifo ? '.fifo' : '';
  const fifoAttributes: Record<string, string> = fifo ? { FifoQueue: 'true' } : {};
  const dlq = await client.send(
    new CreateQueueCommand({
      QueueName: `${name}-dlq${suffix}`,
      Attributes: { ...fifoAttributes, MessageRetentionPeriod: String(FOURTEEN_DAYS_SECONDS) },
    }),
  );
  const deadLetterQueueUrl = dlq.QueueUrl!;
  const attributes = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ['QueueArn'] }),
  );
  const deadLetterQueueArn = attributes.Attributes?.QueueArn;
  if (deadLetterQueueArn === undefined)
    throw new Error(`createQueues: SQS returned no QueueArn for ${deadLetterQueueUrl}`);
  const source = await client.send(
    new CreateQueueCommand({
      QueueName: `${name}${suffix}`,
      Attributes: {
        ...fifoAttributes,
        VisibilityTimeout: String(options.visibilityTimeoutSeconds ?? 30),
        RedrivePolicy: redrivePolicyFor({
          deadLetterQueueArn,
          maxAttempts: options.maxAttempts ?? 5,
          ...(options.headroom !== undefined ? { headroom: options.headroom } : {}),
        }),
      },
    }),
  );
  return { queueUrl: source.QueueUrl!, deadLetterQueueUrl, deadLetterQueueArn };
}
