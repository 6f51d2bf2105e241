// The queue's redrive policy is SQS's own crash-loop backstop: a message received `maxReceiveCount` times is
// moved to the dead-letter queue by SQS itself. inboxkit dead-letters after `maxAttempts`, so the policy sits
// above it and only catches what inboxkit could not (a process that dies on the message every time before the
// DLQ publish, a DLQ that refuses writes).

import { backstopLimit } from '@inboxkit/core';

/** Options of `redrivePolicyFor`. */
export interface RedrivePolicyOptions {
  /** ARN of the dead-letter queue (`GetQueueAttributes` → `QueueArn`). */
  readonly deadLetterQueueArn: string;
  /** The consumer's `maxAttempts`. */
  readonly maxAttempts: number;
  /**
   * Receives allowed beyond `maxAttempts` before SQS moves the message itself. Receives that are not
   * attempts raise the count too: messages released at `stop()`, DLQ browsing, and, in FIFO queues, messages
   * returned to the queue behind a retried one of their group. Default is `max(5, maxAttempts)`.
   */
  readonly headroom?: number;
}

/**
 * The `RedrivePolicy` queue attribute (a JSON string) with `maxReceiveCount` above `maxAttempts`.
 *
 * @example
 * await client.send(new SetQueueAttributesCommand({
 *   QueueUrl: queueUrl,
 *   Attributes: { RedrivePolicy: redrivePolicyFor({ deadLetterQueueArn, maxAttempts: 5 }) },
 * }));
 */
export function redrivePolicyFor(options: RedrivePolicyOptions): string {
  const maxReceiveCount = backstopLimit(options.maxAttempts, {
    headroom: options.headroom ?? ((maxAttempts) => Math.max(5, maxAttempts)),
  });
  return JSON.stringify({
    deadLetterTargetArn: options.deadLetterQueueArn,
    maxReceiveCount: String(maxReceiveCount),
  });
}

/** Reads `maxReceiveCount` from a `RedrivePolicy` attribute; `undefined` when absent or unreadable. */
export function maxReceiveCountOf(redrivePolicy: string | undefined): number | undefined {
  if (redrivePolicy === undefined || redrivePolicy === '') return undefined;
  try {
    const policy = JSON.parse(redrivePolicy) as { maxReceiveCount?: unknown };
    const n = Number(policy.maxReceiveCount);
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}
