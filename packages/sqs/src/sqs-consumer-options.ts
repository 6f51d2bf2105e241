// The options of sqsConsumer(), their defaults, and the one validation that turns them into a frozen
// configuration with messages that say what to change.

import type { Message } from '@aws-sdk/client-sqs';
import { ConfigurationError, optionChecks, transportLogger } from '@inboxkit/core';
import type { IdempotentConsumer, Logger } from '@inboxkit/core';
import { isFifoQueue } from './fifo.js';
import type { SqsClient } from './sqs-client.js';

/** Options of `sqsConsumer`. */
export interface SqsConsumerOptions<P = unknown, Tx = unknown> {
  /** The application's `SQSClient` (or anything with the same `send`). Never created or closed by inboxkit. */
  readonly client: SqsClient;
  /** The queue to consume. A URL ending in `.fifo` is a FIFO queue: order is kept per message group. */
  readonly queueUrl: string;
  /** The idempotent consumer built with `idempotentConsumer()`; its outcomes decide every SQS action. */
  readonly handler: IdempotentConsumer<P, Tx>;
  /**
   * Where dead letters are sent (SendMessage, then the source message is deleted). Give the queue a redrive
   * policy to this queue as a crash-loop backstop: see `redrivePolicyFor`.
   */
  readonly deadLetterQueueUrl: string;
  /**
   * `message`: one `handle()` call (one transaction) per message. `batch`: each received batch goes to
   * `handleBatch()`, claimed and applied in one transaction with a savepoint per message — fewer round trips
   * to Postgres, at the price of a batch waiting for its slowest message. FIFO queues always use `message`.
   * Default is `message`.
   */
  readonly mode?: 'message' | 'batch';
  /**
   * Messages being handled at once (in batch mode a batch takes one per message). In a FIFO queue each
   * message group runs one message at a time. Default is 10.
   */
  readonly concurrency?: number;
  /** Most messages one ReceiveMessage asks for, 1–10. Default is 10. */
  readonly batchSize?: number;
  /**
   * Messages received ahead of a free handler, so the next batch is at hand when a handler finishes: at most
   * `concurrency + prefetch` messages are held (received, not yet settled), all kept invisible by the
   * heartbeat. 0 receives only for idle handlers. Default is `batchSize`.
   */
  readonly prefetch?: number;
  /** Long-polling wait of one ReceiveMessage, 0–20 s. Default is 20. */
  readonly waitTimeSeconds?: number;
  /**
   * Visibility timeout set on receive and by every heartbeat, in seconds. Must exceed the handler's
   * `handlerTimeoutMs`. Default is 30, or the handler timeout plus 10 s when that is longer (40 with core's
   * default 30 s handler timeout).
   */
  readonly visibilityTimeoutSeconds?: number;
  /**
   * How often held messages are pushed back to the full visibility timeout, in seconds; below
   * `visibilityTimeoutSeconds`. Default is half of `visibilityTimeoutSeconds`.
   */
  readonly heartbeatIntervalSeconds?: number;
  /** Message attribute holding the producer's id (matched case-insensitively). Default is `message-id`. */
  readonly messageIdAttribute?: string;
  /** Dot path of a JSON body field holding the id, tried after the attributes (e.g. `meta.id`). Default is none. */
  readonly messageIdBodyField?: string;
  /**
   * Falls back to SQS's own `MessageId` when no producer id is found. Off by default: SQS assigns a new
   * MessageId to every send (a producer's retry is not caught) and to every redrive. Default is false.
   */
  readonly useSqsMessageIdAsId?: boolean;
  /**
   * Replaces the whole id resolution; return `undefined` for "no id" (dead-lettered as `missing-id`). Default is
   * the built-in order: attribute, CloudEvents attribute, body field, CloudEvents body, opt-in MessageId.
   *
   * @example
   * resolveMessageId: (m) => m.MessageAttributes?.['Idempotency-Key']?.StringValue,
   */
  readonly resolveMessageId?: (message: Message) => string | undefined;
  /**
   * How long `stop()` waits for handlers in flight before leaving their messages to reappear after the
   * visibility timeout. Default is the handler's `handlerTimeoutMs` plus 5,000 ms.
   */
  readonly closeTimeoutMs?: number;
  /**
   * `stop()` aborts a ReceiveMessage long poll in flight, so it does not wait up to `waitTimeSeconds` (20 s
   * by default) before draining the handlers, nor hold a deploy's shutdown that long. SQS keeps an aborted
   * poll open on its side until its wait runs out, and messages it hands that poll are hidden for one
   * visibility timeout: they are not lost and cost no attempt, they come later (and their
   * ApproximateReceiveCount rises by one). `false` waits for the poll instead and returns what it brings to
   * the queue at once. Default is `true`.
   *
   * @example
   * sqsConsumer({ client, queueUrl, deadLetterQueueUrl, handler, abortReceiveOnStop: false });
   */
  readonly abortReceiveOnStop?: boolean;
  /**
   * How long a delete waits for others to share its DeleteMessageBatch request when nothing else is being
   * handled, in ms. Ten queued deletes go out at once. Default is 5.
   */
  readonly deleteBatchDelayMs?: number;
  /**
   * How long a delete may wait, at most, while messages this consumer received are still waiting for a handler
   * or being handled: they will settle soon and share its request, so under load DeleteMessageBatch requests go
   * out with ten entries instead of whatever `deleteBatchDelayMs` caught (each request costs the same round
   * trip, and on AWS one billed request, whatever it holds). The effects are already committed: a crash in
   * that window only brings redeliveries that the inbox answers as duplicates. From `deleteBatchDelayMs` to
   * 1000 ms. Default is 50 (or `deleteBatchDelayMs`, if that is larger). Set it equal to `deleteBatchDelayMs`
   * for a fixed delay.
   *
   * @example sqsConsumer({ client, queueUrl, deadLetterQueueUrl, handler, deleteBatchMaxDelayMs: 20 })
   */
  readonly deleteBatchMaxDelayMs?: number;
  /**
   * At `start()`, read both queues' attributes: fail when a queue does not exist or the redrive policy's
   * `maxReceiveCount` is not above `maxAttempts`, warn when there is no redrive policy. Needs
   * `sqs:GetQueueAttributes`. Default is true.
   */
  readonly checkQueues?: boolean;
  /**
   * How long `start()` keeps trying to read the queues' attributes while SQS cannot be reached (connection
   * refused or reset, timeouts, throttling, 5xx) before it rejects with a `StartTimeoutError`; it backs off as
   * a failed receive does (100 ms doubling to 5 s). Refused credentials or access and a missing queue reject at
   * once. Default is `Infinity`: after start the receive loop never gives up either, and a consumer started
   * during an outage should behave like one that was running through it. Unused with `checkQueues: false`
   * (start() then resolves at once and the receive loop does the waiting).
   */
  readonly startTimeoutMs?: number;
  /** Default is the handler's logger. */
  readonly logger?: Logger;
}

/** The validated configuration. */
export interface SqsConsumerConfig {
  readonly queueUrl: string;
  readonly deadLetterQueueUrl: string;
  readonly fifo: boolean;
  readonly mode: 'message' | 'batch';
  readonly concurrency: number;
  readonly batchSize: number;
  readonly prefetch: number;
  readonly waitTimeSeconds: number;
  readonly visibilityTimeoutSeconds: number;
  readonly heartbeatIntervalMs: number;
  readonly messageIdAttribute: string;
  readonly messageIdBodyField: string | undefined;
  readonly useSqsMessageIdAsId: boolean;
  readonly resolveMessageId: ((message: Message) => string | undefined) | undefined;
  readonly closeTimeoutMs: number;
  readonly abortReceiveOnStop: boolean;
  readonly deleteBatchDelayMs: number;
  readonly deleteBatchMaxDelayMs: number;
  readonly checkQueues: boolean;
  readonly startTimeoutMs: number;
  readonly logger: Logger;
}

/** SQS's longest visibility timeout: 12 hours. */
export const MAX_VISIBILITY_SECONDS = 43_200;

/**
 * 30 s, or the handler timeout plus 10 s (room to commit, or to publish a dead letter, after a handler that ran
 * to its timeout) when that is longer.
 */
export function defaultVisibilityTimeoutSeconds(handlerTimeoutMs: number): number {
  return Math.min(MAX_VISIBILITY_SECONDS, Math.max(30, Math.ceil(handlerTimeoutMs / 1000) + 10));
}

const check = optionChecks('sqsConsumer');

/** Validates `options` against the handler's configuration. Throws a `ConfigurationError` saying what to change. */
export function resolveSqsConsumerConfig<P, Tx>(options: SqsConsumerOptions<P, Tx>): SqsConsumerConfig {
  const { queueUrl, deadLetterQueueUrl, handler } = options;
  check.handler(handler);
  if (typeof queueUrl !== 'string' || queueUrl === '')
    throw new ConfigurationError('sqsConsumer: queueUrl is required');
  if (typeof deadLetterQueueUrl !== 'string' || deadLetterQueueUrl === '') {
    throw new ConfigurationError('sqsConsumer: deadLetterQueueUrl is required (dead letters are sent there)');
  }
  if (deadLetterQueueUrl === queueUrl) {
    throw new ConfigurationError('sqsConsumer: deadLetterQueueUrl must name another queue than queueUrl');
  }
  const mode = check.oneOf('mode', options.mode, ['message', 'batch'], 'message');
  const concurrency = check.integer('concurrency', options.concurrency, 10, { max: 10_000 });
  const hint = ' (SQS returns at most 10 messages per receive)';
  const batchSize = check.integer('batchSize', options.batchSize, 10, { max: 10, hint });
  const prefetch = check.integer('prefetch', options.prefetch, batchSize, { min: 0, max: 10_000 });
  const waitTimeSeconds = check.integer('waitTimeSeconds', options.waitTimeSeconds, 20, { min: 0, max: 20 });
  const handlerTimeoutMs = handler.config.handlerTimeoutMs;
  const visibilityTimeoutSeconds = check.integer(
    'visibilityTimeoutSeconds',
    options.visibilityTimeoutSeconds,
    defaultVisibilityTimeoutSeconds(handlerTimeoutMs),
    { max: MAX_VISIBILITY_SECONDS },
  );
  if (visibilityTimeoutSeconds * 1000 <= handlerTimeoutMs) {
    throw new ConfigurationError(
      `sqsConsumer: visibilityTimeoutSeconds (${visibilityTimeoutSeconds} s) must exceed the consumer's handlerTimeoutMs ` +
        `(${handlerTimeoutMs} ms): raise visibilityTimeoutSeconds to at least ${Math.floor(handlerTimeoutMs / 1000) + 1}, ` +
        `or lower handlerTimeoutMs in idempotentConsumer()`,
    );
  }
  const heartbeatSeconds = options.heartbeatIntervalSeconds ?? visibilityTimeoutSeconds / 2;
  if (
    !Number.isFinite(heartbeatSeconds) ||
    heartbeatSeconds <= 0 ||
    heartbeatSeconds >= visibilityTimeoutSeconds
  ) {
    throw new ConfigurationError(
      `sqsConsumer: heartbeatIntervalSeconds must be above 0 and below visibilityTimeoutSeconds (${visibilityTimeoutSeconds}), ` +
        `got ${String(heartbeatSeconds)}; about half the visibility timeout is a good choice`,
    );
  }
  const messageIdAttribute = check.text(
    'messageIdAttribute',
    options.messageIdAttribute,
    'message-id',
    'a non-empty attribute name',
  );
  const bodyPath = 'a non-empty dot path such as `id` or `meta.id`';
  const messageIdBodyField = check.text(
    'messageIdBodyField',
    options.messageIdBodyField,
    undefined,
    bodyPath,
  );
  const closeTimeoutMs = check.number('closeTimeoutMs', options.closeTimeoutMs, handlerTimeoutMs + 5_000);
  const deleteBatchDelayMs = check.number('deleteBatchDelayMs', options.deleteBatchDelayMs, 5, {
    max: 1_000,
  });
  const deleteBatchMaxDelayMs = check.number(
    'deleteBatchMaxDelayMs',
    options.deleteBatchMaxDelayMs,
    Math.max(50, deleteBatchDelayMs),
    { min: { name: 'deleteBatchDelayMs', value: deleteBatchDelayMs }, max: 1_000 },
  );
  const startTimeoutMs = check.positiveMs('startTimeoutMs', options.startTimeoutMs, Infinity);
  return Object.freeze({
    queueUrl,
    deadLetterQueueUrl,
    fifo: isFifoQueue(queueUrl),
    mode,
    concurrency,
    batchSize,
    prefetch,
    waitTimeSeconds,
    visibilityTimeoutSeconds,
    heartbeatIntervalMs: Math.round(heartbeatSeconds * 1000),
    messageIdAttribute,
    messageIdBodyField,
    useSqsMessageIdAsId: options.useSqsMessageIdAsId ?? false,
    resolveMessageId: options.resolveMessageId,
    closeTimeoutMs,
    abortReceiveOnStop: options.abortReceiveOnStop ?? true,
    deleteBatchDelayMs,
    deleteBatchMaxDelayMs,
    checkQueues: options.checkQueues ?? true,
    startTimeoutMs,
    logger: transportLogger(options.logger, handler),
  });
}
