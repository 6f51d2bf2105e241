// The SendMessage request that puts one message in the dead-letter queue. SQS allows 10 attributes, so the
// full `deadLetterHeaders()` record travels as one JSON attribute next to the few that filters need
// (message-id, reason, consumer); the original body is unchanged and the original attributes follow as room
// allows (the rest packed). SQS counts the body and every attribute's name, type and value against one size
// limit (256 KiB by default): a dead letter comes in core's three forms (`deadLetterForms`), each smaller,
// and the consumer sends the first that fits.

import type { Message, SendMessageCommandInput } from '@aws-sdk/client-sqs';
import {
  HEADERS,
  DEAD_LETTER_FORMS,
  deadLetterForms,
  deadLetterRecord,
  deliveryContext,
  injectTraceHeaders,
} from '@inboxkit/core';
import type { DeadLetterForm, DeadLetterOutcome, InboundMessage } from '@inboxkit/core';
import { fifoId, isFifoQueue } from './fifo.js';
import { SQS_ATTRIBUTES, encodeMessageAttributes } from './message-attributes.js';

/** SQS's size limit of a message (body and attributes) unless the queue says otherwise: 256 KiB. */
export const DEFAULT_MAX_SQS_MESSAGE_BYTES = 262_144;

/**
 * How much of a dead letter travels: core's forms (`deadLetterForms`). `full`: the whole record, the original
 * attributes; `compact`: no stack, the error message clipped to 500 characters; `minimal`: no original
 * attributes, no error text, the id once in the `message-id` attribute (clipped past 4,000 characters). The
 * smaller forms name what they lack in `x-inboxkit-dropped`. The body is the original's in every form.
 */
export type { DeadLetterForm };

/** The forms, largest first. */
export { DEAD_LETTER_FORMS };

/** The size SQS counts for `input`: the body's bytes plus every attribute's name, data type and value bytes. */
export function sqsMessageBytes(input: SendMessageCommandInput): number {
  let bytes = Buffer.byteLength(input.MessageBody ?? '', 'utf8');
  for (const [name, value] of Object.entries(input.MessageAttributes ?? {})) {
    bytes += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(value.DataType ?? '', 'utf8');
    if (value.StringValue !== undefined) bytes += Buffer.byteLength(value.StringValue, 'utf8');
    if (value.BinaryValue !== undefined) bytes += value.BinaryValue.byteLength;
  }
  return bytes;
}

/**
 * Builds the DLQ SendMessage input for `message`, dead-lettered by consumer `consumer` with `outcome`, in
 * `form` (`DeadLetterForm`: the smaller forms are the fallbacks for a body near SQS's size limit, which leaves
 * little room for attributes). Every form is read back by `parseDeadLetterHeaders` after
 * `expandDeadLetterHeaders`, the original id included.
 */
export function deadLetterMessage(
  deadLetterQueueUrl: string,
  consumer: string,
  message: InboundMessage,
  raw: Message,
  outcome: DeadLetterOutcome,
  form: DeadLetterForm = 'full',
): SendMessageCommandInput {
  const record = deadLetterRecord(consumer, message, outcome);
  const spec = deadLetterForms(record)[DEAD_LETTER_FORMS.indexOf(form)]!;
  const recordHeaders: Record<string, string> = { ...spec.headers };
  // The minimal form's id travels once, in the message-id attribute, which the parser falls back to.
  if (form === 'minimal') delete recordHeaders[HEADERS.messageId];
  const groupId = raw.Attributes?.MessageGroupId;
  if (groupId !== undefined) recordHeaders[SQS_ATTRIBUTES.sourceMessageGroupId] = groupId;
  const headers: Record<string, string> = {};
  const id = spec.headers[HEADERS.messageId];
  if (id !== undefined) headers[HEADERS.messageId] = id;
  headers[HEADERS.reason] = record.reason;
  headers[HEADERS.consumer] = record.consumer;
  headers[SQS_ATTRIBUTES.deadLetter] = JSON.stringify(recordHeaders);
  for (const [name, value] of Object.entries(spec.originalHeaders ? message.headers : {})) {
    if (name === HEADERS.messageId || name.startsWith('x-inboxkit-')) continue;
    headers[name] = value;
  }
  const input: SendMessageCommandInput = {
    QueueUrl: deadLetterQueueUrl,
    MessageBody: raw.Body ?? '',
    // The copy continues the delivery's trace (its `traceparent` replaces the original's), except in the
    // minimal form, which keeps only what the DLQ cannot do without.
    MessageAttributes: encodeMessageAttributes(
      spec.trace ? injectTraceHeaders(headers, deliveryContext(message)) : headers,
      [HEADERS.reason, HEADERS.consumer, SQS_ATTRIBUTES.deadLetter],
    ),
  };
  if (!isFifoQueue(deadLetterQueueUrl)) return input;
  const identity = record.originalId ?? raw.MessageId ?? '';
  return {
    ...input,
    MessageGroupId: fifoId(groupId ?? identity),
    // The same dead letter sent again (a redelivery after a failed delete) is dropped by SQS; a replay that
    // fails again is a new dead letter.
    MessageDeduplicationId: fifoId(consumer, identity, message.replay?.replayId ?? ''),
  };
}
