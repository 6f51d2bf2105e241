// Deletes settled messages in DeleteMessageBatch requests of up to 10, flushed a few milliseconds after the
// first entry arrives. A delete that SQS refuses is retried a few times, then left alone: the message comes
// back after its visibility timeout and the inbox suppresses it as a duplicate. Nothing here ever claims a
// message as done; the effect was committed before the delete was queued.

import { DeleteMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { Logger } from '@inboxkit/core';
import type { SqsClient } from './sqs-client.js';

/** One message to delete. */
export interface DeleteEntry {
  readonly receiptHandle: string;
  /** SQS MessageId, for logs. */
  readonly messageId: string | undefined;
}

const MAX_ENTRIES = 10;
const MAX_REQUEST_ATTEMPTS = 3;

/** Batches DeleteMessage calls for one queue. */
export class DeleteBatcher {
  readonly #client: SqsClient;
  readonly #queueUrl: string;
  readonly #delayMs: number;
  readonly #logger: Logger;
  #buffer: DeleteEntry[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(client: SqsClient, queueUrl: string, delayMs: number, logger: Logger) {
    this.#client = client;
    this.#queueUrl = queueUrl;
    this.#delayMs = delayMs;
    this.#logger = logger;
  }

  /** Queues a delete; sent at once when 10 are queued, otherwise after the flush delay. */
  enqueue(entry: DeleteEntry): void {
    this.#buffer.push(entry);
    if (this.#buffer.length >= MAX_ENTRIES) this.#flushBuffer();
    else this.#timer ??= setTimeout(() => this.#flushBuffer(), this.#delayMs);
  }

  /** Sends what is queued and waits for every delete in flight. Never rejects. */
  async drain(): Promise<void> {
    this.#flushBuffer();
    while (this.#inFlight.size > 0) await Promise.all(this.#inFlight);
  }

  #flushBuffer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#buffer.length > 0) {
      const batch = this.#buffer.splice(0, MAX_ENTRIES);
      const sending = this.#send(batch).finally(() => this.#inFlight.delete(sending));
      this.#inFlight.add(sending);
    }
  }

  async #send(batch: readonly DeleteEntry[]): Promise<void> {
    let pending = batch;
    for (let attempt = 1; pending.length > 0; attempt++) {
      try {
        const result = await this.#client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.#queueUrl,
            Entries: pending.map((e, i) => ({ Id: String(i), ReceiptHandle: e.receiptHandle })),
          }),
        );
        const failed = result.Failed ?? [];
        const retry: DeleteEntry[] = [];
        for (const f of failed) {
          const entry = pending[Number(f.Id)];
          if (entry === undefined) continue;
          // A stale receipt handle means the message was received again elsewhere: that copy settles it.
          if (f.SenderFault === true || attempt >= MAX_REQUEST_ATTEMPTS) {
            this.#logger.warn(
              { messageId: entry.messageId, code: f.Code, error: f.Message, queueUrl: this.#queueUrl },
              'SQS refused to delete a settled message; it will be redelivered and suppressed as a duplicate',
            );
          } else retry.push(entry);
        }
        pending = retry;
      } catch (error) {
        if (attempt >= MAX_REQUEST_ATTEMPTS) {
          this.#logger.warn(
            { error, count: pending.length, queueUrl: this.#queueUrl },
            'DeleteMessageBatch failed; the messages will be redelivered and suppressed as duplicates',
          );
          return;
        }
      }
      if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** (attempt - 1)));
    }
  }
}
