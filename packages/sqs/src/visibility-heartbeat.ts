// Keeps held messages invisible while their handler runs (or, in a FIFO group, while they wait their turn):
// every message is pushed back to the full visibility timeout about every `intervalMs`, in
// ChangeMessageVisibilityBatch requests of 10. Settling a message first waits for any extension of it still
// in flight, so a late heartbeat can never undo a retry delay or a release.

import { ChangeMessageVisibilityBatchCommand } from '@aws-sdk/client-sqs';
import type { Logger } from '@inboxkit/core';
import type { SqsClient } from './sqs-client.js';

/** A message the consumer holds (received, not yet settled). */
export interface HeldMessage {
  readonly receiptHandle: string;
  readonly messageId: string | undefined;
  /** When its visibility was last set (ms since epoch): the receive, or the last successful extension. */
  extendedAt: number;
  /** The extension in flight that includes it. Never rejects. */
  extending: Promise<void> | undefined;
}

const MAX_ENTRIES = 10;

/** Periodic visibility extension of held messages of one queue. */
export class VisibilityHeartbeat {
  readonly #client: SqsClient;
  readonly #queueUrl: string;
  readonly #visibilityTimeoutSeconds: number;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  readonly #held = new Set<HeldMessage>();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    client: SqsClient,
    queueUrl: string,
    visibilityTimeoutSeconds: number,
    intervalMs: number,
    logger: Logger,
  ) {
    this.#client = client;
    this.#queueUrl = queueUrl;
    this.#visibilityTimeoutSeconds = visibilityTimeoutSeconds;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
  }

  /** Begins ticking: every quarter interval (between 50 ms and 5 s) due messages are extended. */
  start(): void {
    const tick = Math.min(5_000, Math.max(50, Math.floor(this.#intervalMs / 4)));
    this.#timer ??= setInterval(() => this.#extendDue(), tick);
  }

  /** Stops ticking. Messages still held are no longer extended. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Number of messages held. */
  get size(): number {
    return this.#held.size;
  }

  /** Starts extending `message`. */
  track(message: HeldMessage): void {
    this.#held.add(message);
  }

  /** Stops extending `message` and waits until no extension of it is in flight. Never rejects. */
  async untrack(message: HeldMessage): Promise<void> {
    this.#held.delete(message);
    while (message.extending !== undefined) await message.extending;
  }

  #extendDue(): void {
    const now = Date.now();
    const due = [...this.#held].filter(
      (m) => m.extending === undefined && now - m.extendedAt >= this.#intervalMs,
    );
    for (let i = 0; i < due.length; i += MAX_ENTRIES) {
      const batch = due.slice(i, i + MAX_ENTRIES);
      const extending = this.#extend(batch, now).finally(() => {
        for (const m of batch) if (m.extending === extending) m.extending = undefined;
      });
      for (const m of batch) m.extending = extending;
    }
  }

  async #extend(batch: readonly HeldMessage[], sentAt: number): Promise<void> {
    try {
      const result = await this.#client.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: this.#queueUrl,
          Entries: batch.map((m, i) => ({
            Id: String(i),
            ReceiptHandle: m.receiptHandle,
            VisibilityTimeout: this.#visibilityTimeoutSeconds,
          })),
        }),
      );
      const failed = new Set((result.Failed ?? []).map((f) => Number(f.Id)));
      batch.forEach((m, i) => {
        if (!failed.has(i)) m.extendedAt = sentAt;
      });
      for (const f of result.Failed ?? []) {
        const message = batch[Number(f.Id)];
        // Refused for good (a stale receipt handle, or past SQS's 12-hour limit): stop asking.
        if (message !== undefined) this.#held.delete(message);
        this.#logger.warn(
          { messageId: message?.messageId, code: f.Code, error: f.Message, queueUrl: this.#queueUrl },
          'visibility heartbeat refused; the message may be redelivered while its handler runs (the inbox suppresses the duplicate)',
        );
      }
    } catch (error) {
      this.#logger.warn(
        { error, queueUrl: this.#queueUrl },
        'visibility heartbeat failed; retrying on the next tick',
      );
    }
  }
}
