// Read access to an SQS dead-letter queue for `inboxkit dlq list|replay`. SQS has no peek: browsing receives
// messages (hiding them for a while) and then makes them visible again, which raises their receive counts and
// may change their order.

import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import type { Message } from '@aws-sdk/client-sqs';
import { deadLetterEntry, takenDeadLetter } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader } from '@inboxkit/core';
import { SQS_ATTRIBUTES, decodeMessageAttributes, expandDeadLetterHeaders } from './message-attributes.js';
import type { SqsClient } from './sqs-client.js';

/** Options of `sqsDeadLetterQueue`. */
export interface SqsDeadLetterQueueOptions {
  /** The application's `SQSClient` (or anything with the same `send`). Never closed by inboxkit. */
  readonly client: SqsClient;
  /** The dead-letter queue's URL. */
  readonly queueUrl: string;
  /**
   * How long browsed and taken messages stay hidden, in seconds: long enough to finish the listing or the
   * replay of one message. Browsed messages are made visible again at the end of the listing; released ones at
   * the end of the `take` run. Default is 120.
   */
  readonly visibilityTimeoutSeconds?: number;
  /** Long-polling wait of each receive; the listing ends at the first empty receive. Default is 1. */
  readonly waitTimeSeconds?: number;
}

/** A dead-letter entry as read from SQS, with the FIFO group to replay it into. */
export interface SqsDeadLetterEntry extends DeadLetterEntry {
  /** The source message's MessageGroupId (FIFO), used as the replay's `key`. */
  readonly key?: string;
  /** When SQS received the dead letter. */
  readonly timestamp?: Date;
}

function toEntry(message: Message): SqsDeadLetterEntry {
  const headers = expandDeadLetterHeaders(decodeMessageAttributes(message.MessageAttributes));
  const key = headers[SQS_ATTRIBUTES.sourceMessageGroupId] ?? message.Attributes?.MessageGroupId;
  const sent = Number(message.Attributes?.SentTimestamp);
  return deadLetterEntry(headers, message.Body ?? null, message.MessageId ?? '?', {
    ...(key !== undefined ? { key } : {}),
    ...(Number.isFinite(sent) && sent > 0 ? { timestamp: new Date(sent) } : {}),
  });
}

/**
 * A core `DeadLetterQueueReader` over an SQS queue. `nonDestructiveBrowse` is false: `browse` receives up to
 * `limit` messages, hiding them until the listing ends, then makes them visible again (their receive counts
 * rise and their order may change). `take` receives one message at a time; `remove()` deletes it, `release()`
 * leaves it in the queue (made visible again when the run ends, so the same run does not take it twice).
 * Headers include the full dead-letter record unpacked from `x-inboxkit-dead-letter`, so core's
 * `parseDeadLetterHeaders` reads them.
 *
 * @example
 * const dlq = sqsDeadLetterQueue({ client: new SQSClient({}), queueUrl: ordersDlqUrl });
 * for await (const entry of dlq.browse({ limit: 50 })) console.log(entry.id, parseDeadLetterHeaders(entry.headers)?.reason);
 */
export function sqsDeadLetterQueue(options: SqsDeadLetterQueueOptions): DeadLetterQueueReader {
  const { client, queueUrl } = options;
  const visibilityTimeoutSeconds = options.visibilityTimeoutSeconds ?? 120;
  const waitTimeSeconds = options.waitTimeSeconds ?? 1;

  async function receive(max: number): Promise<Message[]> {
    const result = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.max(1, Math.min(10, max)),
        WaitTimeSeconds: waitTimeSeconds,
        VisibilityTimeout: visibilityTimeoutSeconds,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    return result.Messages ?? [];
  }

  async function makeVisible(handles: readonly string[]): Promise<void> {
    for (let i = 0; i < handles.length; i += 10) {
      await client.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: handles
            .slice(i, i + 10)
            .map((h, n) => ({ Id: String(n), ReceiptHandle: h, VisibilityTimeout: 0 })),
        }),
      );
    }
  }

  return {
    nonDestructiveBrowse: false,

    async *browse({ limit }) {
      const handles: string[] = [];
      const seen = new Set<string>();
      try {
        let count = 0;
        while (count < limit) {
          const messages = await receive(limit - count);
          if (messages.length === 0) break;
          for (const message of messages) {
            if (message.ReceiptHandle !== undefined) handles.push(message.ReceiptHandle);
            if (message.MessageId !== undefined && seen.has(message.MessageId)) continue;
            if (message.MessageId !== undefined) seen.add(message.MessageId);
            if (count >= limit) continue;
            count++;
            yield toEntry(message);
          }
        }
      } finally {
        await makeVisible(handles);
      }
    },

    async *take({ limit }) {
      const released: string[] = [];
      try {
        for (let count = 0; count < limit;) {
          const [message] = await receive(1);
          if (message === undefined) break;
          const handle = message.ReceiptHandle;
          if (handle === undefined) continue;
          count++;
          yield takenDeadLetter(toEntry(message), {
            remove: async () => {
              await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: handle }));
            },
            release: () => void released.push(handle),
          });
        }
      } finally {
        await makeVisible(released);
      }
    },

    async close() {},
  };
}
