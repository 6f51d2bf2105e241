// Deletes settled messages in DeleteMessageBatch requests of up to 10. A request goes out as soon as 10 deletes
// are queued; otherwise a few milliseconds after the first one was queued — unless messages of this consumer
// are still being handled, in which case the deletes wait for them (most will settle and join the request), up
// to a bound. Every request costs the same whatever it holds (a round trip, the SDK's CPU, the broker's work,
// and on AWS one billed request), so under load the requests go out full instead of by whatever a fixed timer
// caught. Waiting costs nothing durable: the effects are committed; a crash meanwhile only means redeliveries
// the inbox answers as duplicates. A delete that SQS refuses is retried a few times, then left alone: the message comes
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

/** When a partial DeleteMessageBatch goes out (see the file comment). */
export interface DeleteTiming {
  /** How long the first queued delete waits for others when nothing else is being handled, in ms. */
  readonly delayMs: number;
  /** How long it waits at most while messages are still being handled, in ms (at least `delayMs`). */
  readonly maxDelayMs: number;
  /** How many received messages are not settled yet (waiting for a handler or being handled). */
  readonly unsettled: () => number;
}

/** Batches DeleteMessage calls for one queue. */
export class DeleteBatcher {
  readonly #client: SqsClient;
  readonly #queueUrl: string;
  readonly #timing: DeleteTiming;
  readonly #logger: Logger;
  #buffer: DeleteEntry[] = [];
  #timer: NodeJS.Timeout | undefined;
  /** When the oldest delete in the buffer was queued (performance.now()). */
  #firstQueuedAt = 0;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(client: SqsClient, queueUrl: string, timing: DeleteTiming, logger: Logger) {
    this.#client = client;
    this.#queueUrl = queueUrl;
    this.#timing = timing;
    this.#logger = logger;
  }

  /** Queues a delete; sent at once when 10 are queued, otherwise when the timing says (see the file comment). */
  enqueue(entry: DeleteEntry): void {
    this.#buffer.push(entry);
    if (this.#buffer.length >= MAX_ENTRIES) this.#flushBuffer();
    else if (this.#timer === undefined) {
      this.#firstQueuedAt = performance.now();
      this.#timer = setTimeout(this.#due, this.#timing.delayMs);
    }
  }

  /** The timer of the oldest queued delete: send, or wait a little more for messages still being handled. */
  readonly #due = (): void => {
    this.#timer = undefined;
    if (this.#buffer.length === 0) return;
    const left = this.#timing.maxDelayMs - (performance.now() - this.#firstQueuedAt);
    if (left >= 1 && this.#timing.unsettled() > 0) {
      this.#timer = setTimeout(this.#due, Math.min(Math.max(1, this.#timing.delayMs), left));
      return;
    }
    this.#flushBuffer();
  };

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
