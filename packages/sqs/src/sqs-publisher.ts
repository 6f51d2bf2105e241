// "Publish and be sure" for SQS: SendMessageBatch in chunks, every entry checked, so the DLQ path, DLQ replay
// and the outbox relay only move on once SQS has accepted each message.

import { GetQueueAttributesCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { SendMessageBatchRequestEntry } from '@aws-sdk/client-sqs';
import {
  ConfigurationError,
  HEADERS,
  injectTraceHeaders,
  MessageTooLargeError,
  PublishError,
} from '@inboxkit/core';
import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import { DEFAULT_MAX_SQS_MESSAGE_BYTES } from './dead-letter-message.js';
import { fifoId, isFifoQueue } from './fifo.js';
import { encodeMessageAttributes, SQS_ATTRIBUTES } from './message-attributes.js';
import type { SqsClient } from './sqs-client.js';

/** Options of `sqsPublisher`. */
export interface SqsPublisherOptions {
  /** The application's `SQSClient` (or anything with the same `send`). Never closed by inboxkit. */
  readonly client: SqsClient;
  /**
   * Sends of one batch entry that SQS failed on its side (`SenderFault: false`) before giving up. Errors of
   * the request itself are left to the client's own retry strategy. Default is 3.
   */
  readonly maxEntryAttempts?: number;
  /**
   * The largest message (body plus every attribute's name, type and value, counted as SQS counts them) a queue
   * takes. By default each destination queue's own `MaximumMessageSize`, read once per queue with
   * GetQueueAttributes (AWS allows up to 1 MiB; a queue that reports none, as ElasticMQ's, is taken to allow
   * 256 KiB, SQS's long-standing default); when that read is refused (no
   * `sqs:GetQueueAttributes` permission, say) no size is checked before sending and SQS's own refusal is
   * recognised instead. Either way a message too large for its queue rejects the call with a non-retriable
   * `MessageTooLargeError` naming it (the outbox relay parks that row at once), never a retriable
   * `PublishError` that would be tried again forever. Give a number to check against it and read nothing.
   */
  readonly maxMessageBytes?: number;
}

/** SQS's limits for one SendMessageBatch request. */
const MAX_BATCH_ENTRIES = 10;
const MAX_BATCH_BYTES = 256 * 1024;
/** SQS's longest per-message delay. */
const MAX_DELAY_SECONDS = 900;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Headers given their own attribute first when a message has more than SQS's 10 allowed. */
export const PRIORITY_HEADERS: readonly string[] = [
  HEADERS.replayId,
  HEADERS.replayBy,
  HEADERS.replayAt,
  HEADERS.reason,
  HEADERS.consumer,
];

function bodyText(message: OutgoingMessage): string {
  let text: string;
  if (typeof message.body === 'string') text = message.body;
  else {
    try {
      text = utf8.decode(message.body);
    } catch (cause) {
      throw new PublishError(`message ${message.id}: SQS bodies are text; the body is not valid UTF-8`, {
        cause,
      });
    }
  }
  if (text.length === 0) throw new PublishError(`message ${message.id}: SQS does not accept an empty body`);
  const refused = firstRefusedCharacter(text);
  if (refused !== undefined) {
    const hex = refused.codePoint.toString(16).toUpperCase().padStart(4, '0');
    throw new PublishError(
      `message ${message.id}: SQS refuses U+${hex} (at UTF-16 index ${refused.index}) in a message body; it accepts ` +
        'only tab, LF, CR, U+0020–U+D7FF, U+E000–U+FFFD and U+10000–U+10FFFF (a lone surrogate is not text): ' +
        'encode the body (base64, JSON escapes) before publishing',
    );
  }
  return text;
}

/**
 * The first character of `text` SQS refuses in a body (it accepts #x9 | #xA | #xD | #x20–#xD7FF |
 * #xE000–#xFFFD | #x10000–#x10FFFF), with its UTF-16 index; `undefined` when there is none. A body is the
 * sender's data, so it is never cleaned the way attribute text is (`sqsText`): the publish is refused instead.
 */
function firstRefusedCharacter(
  text: string,
): { readonly index: number; readonly codePoint: number } | undefined {
  const found = NOT_SQS_BODY.exec(text);
  return found === null ? undefined : { index: found.index, codePoint: found[0].charCodeAt(0) };
}

const NOT_SQS_BODY =
  // eslint-disable-next-line no-control-regex -- the control characters are what SQS refuses
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The SendMessageBatch entry for one message. `Id` is set by the caller. */
function toEntry(message: OutgoingMessage): Omit<SendMessageBatchRequestEntry, 'Id'> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(injectTraceHeaders(message.headers)))
    if (k.toLowerCase() !== HEADERS.messageId) headers[k] = v;
  headers[HEADERS.messageId] = message.id;
  if (message.timestamp !== undefined)
    headers[SQS_ATTRIBUTES.timestamp] = String(message.timestamp.getTime());
  const entry: Omit<SendMessageBatchRequestEntry, 'Id'> = {
    MessageBody: bodyText(message),
    MessageAttributes: encodeMessageAttributes(headers, [SQS_ATTRIBUTES.timestamp, ...PRIORITY_HEADERS]),
  };
  if (isFifoQueue(message.destination)) {
    // A replay must not be swallowed by SQS's 5-minute deduplication of the original send.
    const replayId = Object.entries(message.headers ?? {}).find(
      ([k]) => k.toLowerCase() === HEADERS.replayId,
    )?.[1];
    return {
      ...entry,
      MessageGroupId: fifoId(message.key ?? message.id),
      MessageDeduplicationId: replayId === undefined ? fifoId(message.id) : fifoId(message.id, replayId),
    };
  }
  if (message.delayMs !== undefined && message.delayMs > 0) {
    return { ...entry, DelaySeconds: Math.min(MAX_DELAY_SECONDS, Math.ceil(message.delayMs / 1000)) };
  }
  return entry;
}

/**
 * True when SQS refused a request or a batch entry because a message, or the batch, is over its size limit:
 * the error codes AWS documents for it (`BatchRequestTooLong`, `MessageTooLong`) or an `InvalidParameterValue`
 * whose text says the message must be shorter. Exported for its tests.
 */
export function isSqsTooLarge(error: {
  name?: unknown;
  Code?: unknown;
  code?: unknown;
  message?: unknown;
  Message?: unknown;
}): boolean {
  const code = [error.name, error.Code, error.code].find((c): c is string => typeof c === 'string');
  if (code !== undefined && /BatchRequestTooLong|MessageTooLong|RequestEntityTooLarge/i.test(code))
    return true;
  const text = [error.message, error.Message].find((m): m is string => typeof m === 'string');
  return (
    text !== undefined && /must be shorter than|too long|exceeds the (allowed )?maximum|too large/i.test(text)
  );
}

function entryBytes(entry: Omit<SendMessageBatchRequestEntry, 'Id'>): number {
  let n = Buffer.byteLength(entry.MessageBody ?? '');
  for (const [k, v] of Object.entries(entry.MessageAttributes ?? {})) {
    n += Buffer.byteLength(k) + Buffer.byteLength(v.StringValue ?? '') + Buffer.byteLength(v.DataType ?? '');
  }
  return n;
}

/** One message ready to send: its id (for error messages) and its entry without the batch-local `Id`. */
interface Prepared {
  readonly id: string;
  readonly entry: Omit<SendMessageBatchRequestEntry, 'Id'>;
}

/** Splits one destination's entries into batches within SQS's count and size limits, order kept. */
function chunk(entries: readonly Prepared[]): Prepared[][] {
  const chunks: Prepared[][] = [];
  let current: Prepared[] = [];
  let bytes = 0;
  for (const entry of entries) {
    const size = entryBytes(entry.entry);
    if (current.length > 0 && (current.length === MAX_BATCH_ENTRIES || bytes + size > MAX_BATCH_BYTES)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(entry);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * A core `Publisher` over SQS. `publish` resolves once SQS has accepted every message and rejects with a
 * `PublishError` naming the failed ones otherwise. Each message gets a `message-id` attribute; for a FIFO queue
 * its `key` is the MessageGroupId (the id when no key is given) and its id the MessageDeduplicationId (with the
 * replay id for a replay). `timestamp` becomes the `x-inboxkit-timestamp` attribute (epoch ms), which the
 * consumer reads before SentTimestamp. `delayMs` becomes DelaySeconds (at most 900 s) on standard queues; FIFO
 * queues have no per-message delay and ignore it. Messages to one queue are sent in order, one batch at a time. A
 * body SQS would refuse (empty, not UTF-8, or with a character outside SQS's set: a NUL, a lone surrogate, …)
 * rejects the whole call with a `PublishError` naming the message before anything is sent; bodies are never altered.
 * A message over its queue's size limit (see `maxMessageBytes`) rejects the call with a non-retriable
 * `MessageTooLargeError` naming it, before anything is sent when the limit is known.
 *
 * @example
 * const publisher = sqsPublisher({ client: new SQSClient({}) });
 * await publisher.publish([{ destination: queueUrl, id: 'order-42', body: JSON.stringify(order) }]);
 */
export function sqsPublisher(options: SqsPublisherOptions): Publisher {
  const client = options.client;
  const maxEntryAttempts = options.maxEntryAttempts ?? 3;
  const fixedLimit = options.maxMessageBytes;
  if (fixedLimit !== undefined && (!Number.isSafeInteger(fixedLimit) || fixedLimit <= 0)) {
    throw new ConfigurationError(
      `sqsPublisher: \`maxMessageBytes\` must be a positive integer, got ${fixedLimit}`,
    );
  }
  /** Each queue's size limit as read once (`undefined`: not readable, SQS's refusal decides). */
  const limits = new Map<string, Promise<number | undefined>>();
  let closed = false;

  function limitOf(queueUrl: string): Promise<number | undefined> {
    if (fixedLimit !== undefined) return Promise.resolve(fixedLimit);
    let limit = limits.get(queueUrl);
    if (limit === undefined) {
      limit = client
        .send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['MaximumMessageSize'] }))
        .then(
          (result) => {
            // A queue that reports no limit (ElasticMQ) gets SQS's long-standing default, as the consumer's
            // dead-letter forms do.
            const bytes = Number(result.Attributes?.MaximumMessageSize);
            return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : DEFAULT_MAX_SQS_MESSAGE_BYTES;
          },
          () => {
            // Not cached: a transient failure should not switch the check off for the publisher's lifetime.
            limits.delete(queueUrl);
            return undefined;
          },
        );
      limits.set(queueUrl, limit);
    }
    return limit;
  }

  function tooLarge(queueUrl: string, p: Prepared, detail: string, cause?: unknown): MessageTooLargeError {
    return new MessageTooLargeError(`message ${p.id} is too large for ${queueUrl}: ${detail}`, {
      messageId: p.id,
      ...(cause === undefined ? {} : { cause }),
    });
  }

  async function sendBatch(queueUrl: string, batch: readonly Prepared[]): Promise<void> {
    let pending = batch.map((p, i) => ({ ...p, slot: String(i) }));
    for (let attempt = 1; pending.length > 0; attempt++) {
      let result;
      try {
        result = await client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: pending.map((p) => ({ ...p.entry, Id: p.slot })),
          }),
        );
      } catch (cause) {
        if (isSqsTooLarge(cause as Error)) {
          // One of them (or all together) is over the limit: alone, the one SQS refuses is named.
          if (pending.length === 1) throw tooLarge(queueUrl, pending[0]!, (cause as Error).message, cause);
          for (const p of pending) await sendBatch(queueUrl, [p]);
          return;
        }
        throw new PublishError(`SendMessageBatch to ${queueUrl} failed: ${(cause as Error).message}`, {
          cause,
        });
      }
      const failed = result.Failed ?? [];
      if (failed.length === 0) return;
      const bySlot = new Map(pending.map((p) => [p.slot, p]));
      const refused = failed.find((f) => isSqsTooLarge(f) && bySlot.has(f.Id ?? ''));
      if (refused !== undefined) {
        throw tooLarge(
          queueUrl,
          bySlot.get(refused.Id ?? '')!,
          `${refused.Code ?? ''} ${refused.Message ?? ''}`.trim(),
        );
      }
      if (failed.some((f) => f.SenderFault === true) || attempt >= maxEntryAttempts) {
        const detail = failed.map((f) =>
          `${bySlot.get(f.Id ?? '')?.id ?? f.Id}: ${f.Code ?? 'error'} ${f.Message ?? ''}`.trim(),
        );
        throw new PublishError(
          `SQS rejected ${failed.length} message(s) sent to ${queueUrl}: ${detail.join('; ')}`,
        );
      }
      pending = failed.flatMap((f) => bySlot.get(f.Id ?? '') ?? []);
      await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
    }
  }

  return {
    async publish(messages) {
      if (closed) throw new PublishError('the SQS publisher is closed');
      const byQueue = new Map<string, Prepared[]>();
      for (const message of messages) {
        const list = byQueue.get(message.destination) ?? [];
        list.push({ id: message.id, entry: toEntry(message) });
        byQueue.set(message.destination, list);
      }
      // A message over its queue's limit is refused before anything is sent: SQS would refuse it on every try.
      await Promise.all(
        [...byQueue].map(async ([queueUrl, entries]) => {
          const limit = await limitOf(queueUrl);
          if (limit === undefined) return;
          for (const p of entries) {
            const bytes = entryBytes(p.entry);
            if (bytes > limit)
              throw tooLarge(queueUrl, p, `${bytes} bytes, the queue takes at most ${limit}`);
          }
        }),
      );
      await Promise.all(
        [...byQueue].map(async ([queueUrl, entries]) => {
          for (const batch of chunk(entries)) await sendBatch(queueUrl, batch);
        }),
      );
    },
    async close() {
      closed = true;
    },
  };
}
