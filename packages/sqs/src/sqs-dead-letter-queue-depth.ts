// The depth of an SQS DLQ for the DLQ gauges (`observeDeadLetters` in @inboxkit/core/postgres): one
// GetQueueAttributes call, which SQS answers from its own approximate counters, so reading it costs nothing
// per message.

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { BrokerDeadLetterQueueDepth } from '@inboxkit/core/postgres';
import type { SqsClient } from './sqs-client.js';

/** A broker DLQ's depth, as `observeDeadLetters` (`@inboxkit/core/postgres`) takes it in `brokerQueues`. */
export type SqsDeadLetterQueueDepth = BrokerDeadLetterQueueDepth;

/** Options of `sqsDeadLetterQueueDepth`. */
export interface SqsDeadLetterQueueDepthOptions {
  /** The application's client (never closed here). */
  readonly client: SqsClient;
  readonly queueUrl: string;
  /** The gauge's `dlq` attribute. Default is the queue URL's last path segment (the queue name). */
  readonly name?: string;
}

/**
 * The DLQ's depth: messages visible plus in flight plus delayed (`ApproximateNumberOf…`), so a dead letter a
 * `dlq list` is browsing still counts.
 *
 * @example
 * observeDeadLetters(store, { brokerQueues: [sqsDeadLetterQueueDepth({ client, queueUrl: dlqUrl })] });
 */
export function sqsDeadLetterQueueDepth(options: SqsDeadLetterQueueDepthOptions): SqsDeadLetterQueueDepth {
  const name = options.name ?? options.queueUrl.slice(options.queueUrl.lastIndexOf('/') + 1);
  return {
    name,
    async depth() {
      const { Attributes: a = {} } = await options.client.send(
        new GetQueueAttributesCommand({
          QueueUrl: options.queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
        }),
      );
      return Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) + Number(a.ApproximateNumberOfMessagesDelayed ?? 0);
    },
  };
}
