// Creates a source queue and its dead-letter queue wired the way sqsConsumer expects: the DLQ keeps messages
// for the longest retention SQS allows, and the source's redrive policy sits above maxAttempts. For tests,
// examples and first setups; production queues usually come from infrastructure code, with the same settings.

import { CreateQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import {
  ConfigurationError,
  errorField as field,
  optionChecks,
  retryStart,
  silentLogger,
  startRetryDelay,
  tlsFailure,
} from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import { redrivePolicyFor } from './redrive-policy.js';
import type { SqsAdminClient } from './sqs-client.js';
import { isSqsTransient, sqsAuthFailure } from './start-retry.js';

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
  /**
   * How long to keep trying while SQS cannot be reached (connection refused or reset, timeouts, throttling, a
   * 5xx) before rejecting with a `StartTimeoutError`; refused credentials or permissions and other refusals
   * reject at once. Each attempt runs after the client's own retries. Default is `Infinity`, as
   * `declareTopology`'s and the consumers' `startTimeoutMs`.
   */
  readonly startTimeoutMs?: number;
  /** Backoff between attempts (×2 per attempt, with jitter). Default is 500 ms up to 30,000 ms. */
  readonly reconnect?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  /** Receives a warning per failed attempt, with the next delay. Default is silent. */
  readonly logger?: Logger;
  /** Aborting it ends the wait: the call rejects with the signal's reason. Default is none. */
  readonly signal?: AbortSignal;
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
 * policy from `redrivePolicyFor`. While SQS cannot be reached it keeps trying, as `declareTopology` and the
 * consumers' `start()` do (`startTimeoutMs`, default without a time limit; a warning per attempt to `logger`),
 * so a process started while SQS or ElasticMQ comes up waits instead of dying. Refused credentials or access
 * reject at once with a `ConfigurationError`; other refusals (a queue that exists with other attributes) as
 * they are.
 *
 * @example
 * const { queueUrl, deadLetterQueueUrl } = await createQueues({ client, name: 'orders', maxAttempts: 5 });
 * // bounded wait for an endpoint that is still starting:
 * await createQueues({ client, name: 'orders', startTimeoutMs: 60_000, logger });
 */
export async function createQueues(options: CreateQueuesOptions): Promise<CreatedQueues> {
  const check = optionChecks('createQueues');
  const backoff = check.backoff('reconnect', options.reconnect);
  const timeoutMs = check.positiveMs('startTimeoutMs', options.startTimeoutMs, Infinity);
  const signal = options.signal ?? new AbortController().signal;
  const created = await retryStart({
    attempt: () => createOnce(options),
    permanent: createQueuesFailure,
    delayMs: (n) => startRetryDelay(n, backoff.initialDelayMs, backoff.maxDelayMs),
    timeoutMs,
    signal,
    abandon: (attempt) => void attempt.catch(() => undefined),
    logger: options.logger ?? silentLogger,
    what: 'createQueues',
    context: { queue: options.name },
    service: 'SQS',
  });
  if (created === undefined) throw signal.reason ?? new Error('createQueues: aborted');
  return created.value;
}

/** What retrying cannot fix, as the error to reject with; `undefined` while SQS may still come up. */
function createQueuesFailure(error: unknown): unknown {
  const auth = sqsAuthFailure(error);
  if (auth !== undefined) {
    return new ConfigurationError(
      `createQueues: SQS refused the request (${String(field(auth, 'name'))}: ${String(field(auth, 'message'))}): check the ` +
        "client's credentials and region, and allow it sqs:CreateQueue and sqs:GetQueueAttributes",
      { cause: error },
    );
  }
  const tls = tlsFailure(error);
  if (tls !== undefined) {
    return new ConfigurationError(
      `createQueues: the TLS handshake with the SQS endpoint failed (${String(field(tls, 'message'))}): check the ` +
        'endpoint URL and its certificate',
      { cause: error },
    );
  }
  return isSqsTransient(error) ? undefined : error;
}

async function createOnce(options: CreateQueuesOptions): Promise<CreatedQueues> {
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
