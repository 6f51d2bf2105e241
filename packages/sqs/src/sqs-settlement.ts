// SQS's settlement verbs, the port core's `settle()` drives: ack is a (batched) delete, redeliver a visibility
// change, dead-letter a SendMessage to the DLQ in the form asked for, leave stops the heartbeat so the message
// reappears after its visibility timeout. None decides what happens to a message: that is core's.

import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { BrokerSettlement, DeadLetterForm, DeadLetterOutcome, FormAttempt } from '@inboxkit/core';
import { deadLetterMessage, DEFAULT_MAX_SQS_MESSAGE_BYTES, sqsMessageBytes } from './dead-letter-message.js';
import { DeleteBatcher } from './delete-batcher.js';
import { MAX_VISIBILITY_SECONDS } from './sqs-consumer-options.js';
import type { SqsConsumerConfig } from './sqs-consumer-options.js';
import type { SqsClient } from './sqs-client.js';
import type { Held } from './held-message.js';
import { VisibilityHeartbeat } from './visibility-heartbeat.js';

/** True for an error SQS blames on the request (the AWS SDK's `$fault: 'client'`): too large, most likely. */
function isClientFault(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { $fault?: unknown }).$fault === 'client';
}

/** The settlement verbs of one SQS consumer. */
export class SqsSettlement implements BrokerSettlement<Held> {
  /** The DLQ's size limit (its `MaximumMessageSize`, read at start), for skipping forms that cannot fit. */
  deadLetterMaxBytes = DEFAULT_MAX_SQS_MESSAGE_BYTES;
  /** Set once `stop()` gave up waiting: nothing is returned at once any more (the visibility timeout does it). */
  closed = false;

  readonly #client: SqsClient;
  readonly #config: SqsConsumerConfig;
  readonly #consumerName: string;
  /** Keeps held messages invisible; leaving one stops it. */
  readonly heartbeat: VisibilityHeartbeat;
  /** Batches the deletes of settled messages. */
  readonly deleter: DeleteBatcher;

  constructor(client: SqsClient, config: SqsConsumerConfig, consumerName: string) {
    this.#client = client;
    this.#config = config;
    this.#consumerName = consumerName;
    this.heartbeat = new VisibilityHeartbeat(
      client,
      config.queueUrl,
      config.visibilityTimeoutSeconds,
      config.heartbeatIntervalMs,
      config.logger,
    );
    // Held messages: waiting for a handler or being handled (a settled one is untracked before its delete).
    const timing = {
      delayMs: config.deleteBatchDelayMs,
      maxDelayMs: config.deleteBatchMaxDelayMs,
      unsettled: () => this.heartbeat.size,
    };
    this.deleter = new DeleteBatcher(client, config.queueUrl, timing, config.logger);
  }

  async ack(held: Held): Promise<void> {
    await this.heartbeat.untrack(held);
    this.deleter.enqueue(held);
  }

  /** ChangeMessageVisibility to the retry's delay (at most 12 h); not deleted, so SQS redelivers it. */
  async redeliver(held: Held, delayMs: number): Promise<FormAttempt> {
    await this.heartbeat.untrack(held);
    const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(delayMs / 1000));
    try {
      await this.#client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.#config.queueUrl,
          ReceiptHandle: held.receiptHandle,
          VisibilityTimeout: seconds,
        }),
      );
      return { status: 'sent' };
    } catch (error) {
      // It returns after its current visibility timeout instead.
      return { status: 'failed', error };
    }
  }

  /**
   * SendMessage of the dead letter in `form`. A form over the DLQ's limit is not worth a round trip unless it is
   * the last one (a queue may allow more); SQS refusing the request (`$fault: 'client'`) is taken as too large.
   */
  async deadLetter(held: Held, form: DeadLetterForm, outcome: DeadLetterOutcome): Promise<FormAttempt> {
    const input = deadLetterMessage(
      this.#config.deadLetterQueueUrl,
      this.#consumerName,
      held.inbound,
      held.raw,
      outcome,
      form,
    );
    if (form !== 'minimal' && sqsMessageBytes(input) > this.deadLetterMaxBytes) {
      return {
        status: 'too-large',
        error: new Error(`the ${form} dead letter is over ${this.deadLetterMaxBytes} bytes`),
      };
    }
    try {
      await this.#client.send(new SendMessageCommand(input));
      return { status: 'sent' };
    } catch (error) {
      return { status: isClientFault(error) ? 'too-large' : 'failed', error };
    }
  }

  /** Stops extending its visibility: SQS redelivers it after the timeout. */
  async leave(held: Held): Promise<void> {
    await this.heartbeat.untrack(held);
  }

  /** Makes messages visible again at once (they were not handled). Never rejects. */
  async returnToQueue(held: readonly Held[]): Promise<void> {
    for (const h of held) await this.heartbeat.untrack(h);
    if (this.closed) return;
    const logger = this.#config.logger;
    for (let i = 0; i < held.length; i += 10) {
      const batch = held.slice(i, i + 10);
      try {
        const result = await this.#client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.#config.queueUrl,
            Entries: batch.map((h, n) => ({
              Id: String(n),
              ReceiptHandle: h.receiptHandle,
              VisibilityTimeout: 0,
            })),
          }),
        );
        if ((result.Failed ?? []).length > 0) {
          logger.warn(
            { failed: result.Failed },
            'sqsConsumer: some messages could not be returned; they reappear after their visibility timeout',
          );
        }
      } catch (error) {
        logger.warn(
          { error },
          'sqsConsumer: messages could not be returned; they reappear after their visibility timeout',
        );
      }
    }
  }
}
