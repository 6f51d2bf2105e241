// The start-up check of the queues sqsConsumer depends on: both exist, and the source's redrive policy (the
// crash-loop backstop) lets inboxkit reach maxAttempts before SQS moves a message on its own.

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { ConfigurationError, isBackstop, retryStart, tlsFailure } from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import { maxReceiveCountOf } from './redrive-policy.js';
import { isQueueDoesNotExist } from './sqs-client.js';
import { isSqsTransient, sqsAuthFailure, sqsStartFailure } from './start-retry.js';
import type { SqsClient } from './sqs-client.js';
import type { SqsConsumerConfig } from './sqs-consumer-options.js';

async function attributes(
  client: SqsClient,
  queueUrl: string,
  role: string,
  logger: Logger,
): Promise<Record<string, string> | undefined> {
  try {
    const result = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['RedrivePolicy', 'QueueArn', 'MaximumMessageSize'],
      }),
    );
    return result.Attributes ?? {};
  } catch (error) {
    if (isQueueDoesNotExist(error)) {
      throw new ConfigurationError(
        `sqsConsumer: the ${role} ${queueUrl} does not exist; create it or fix the URL`,
        {
          cause: error,
        },
      );
    }
    // Unreachable, throttled, refused credentials: start() retries or rejects. Anything else only costs the check.
    if (isSqsTransient(error) || sqsAuthFailure(error) !== undefined || tlsFailure(error) !== undefined)
      throw error;
    logger.warn(
      { error, queueUrl },
      `sqsConsumer: could not read the ${role}'s attributes; skipping the start-up check`,
    );
    return undefined;
  }
}

/** What the start-up check learned about the queues. */
export interface CheckedQueues {
  /** The dead-letter queue's `MaximumMessageSize` in bytes, when SQS reported one. */
  readonly deadLetterMaxBytes: number | undefined;
}

/**
 * Fails with a `ConfigurationError` when a queue does not exist or the redrive policy's `maxReceiveCount` is
 * not above `maxAttempts`; warns when the source has no redrive policy. Returns the DLQ's size limit.
 */
export async function checkQueues(
  client: SqsClient,
  queueUrl: string,
  deadLetterQueueUrl: string,
  maxAttempts: number,
  logger: Logger,
): Promise<CheckedQueues> {
  const [source, dlq] = await Promise.all([
    attributes(client, queueUrl, 'queue', logger),
    attributes(client, deadLetterQueueUrl, 'dead-letter queue', logger),
  ]);
  const limit = Number(dlq?.MaximumMessageSize);
  const checked = { deadLetterMaxBytes: Number.isSafeInteger(limit) && limit > 0 ? limit : undefined };
  if (source === undefined) return checked;
  const maxReceiveCount = maxReceiveCountOf(source.RedrivePolicy);
  if (maxReceiveCount === undefined) {
    logger.warn(
      { queueUrl },
      'sqsConsumer: the queue has no redrive policy; a message that crashes the process on every receive is retried ' +
        'until the retention period ends. Set one with redrivePolicyFor()',
    );
  } else if (!isBackstop(maxReceiveCount, maxAttempts)) {
    throw new ConfigurationError(
      `sqsConsumer: the queue's redrive policy moves messages after ${maxReceiveCount} receives, which is not above ` +
        `maxAttempts (${maxAttempts}): SQS would dead-letter them without inboxkit's record. Raise maxReceiveCount to at ` +
        `least ${maxAttempts + 1} (redrivePolicyFor() adds headroom) or lower maxAttempts`,
    );
  }
  return checked;
}

/**
 * The queue check of `start()`: SQS down or unreachable (ElasticMQ not up yet, a network blip) is tried again
 * with the receive loop's backoff, as a running consumer does; credentials, access and missing queues reject at
 * once (`sqsStartFailure`). `undefined` when `signal` aborted first (stop() was called).
 */
export async function checkQueuesAtStart(
  client: SqsClient,
  config: SqsConsumerConfig,
  maxAttempts: number,
  signal: AbortSignal,
): Promise<CheckedQueues | undefined> {
  const checked = await retryStart({
    attempt: () =>
      checkQueues(client, config.queueUrl, config.deadLetterQueueUrl, maxAttempts, config.logger),
    permanent: sqsStartFailure,
    delayMs: (attempt) => Math.min(5_000, 100 * 2 ** Math.min(attempt, 30)),
    timeoutMs: config.startTimeoutMs,
    signal,
    abandon: () => undefined, // a read of attributes leaves nothing behind
    logger: config.logger,
    what: 'sqsConsumer',
    context: { queueUrl: config.queueUrl },
  });
  return checked?.value;
}
