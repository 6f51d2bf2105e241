// The SendMessage request that puts one message in the dead-letter queue. SQS allows 10 attributes, so the
// full `deadLetterHeaders()` record travels as one JSON attribute next to the few that filters need
// (message-id, reason, consumer); the original body is unchanged and the original attributes follow as room
// allows (the rest packed).

import type { Message, SendMessageCommandInput } from '@aws-sdk/client-sqs';
import { HEADERS, deadLetterHeaders, deadLetterRecord } from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage } from '@inboxkit/core';
import { fifoId, isFifoQueue } from './fifo.js';
import { SQS_ATTRIBUTES, encodeMessageAttributes } from './message-attributes.js';

/** A compact dead letter keeps this much of the error message. */
const COMPACT_ERROR_MESSAGE = 500;

/**
 * Builds the DLQ SendMessage input for `message`, dead-lettered by consumer `consumer` with `outcome`.
 * `compact` leaves out the original attributes and the error's stack and clips its message: the fallback when
 * SQS refuses the full form (a body near SQS's size limit leaves little room for attributes).
 */
export function deadLetterMessage(
  deadLetterQueueUrl: string,
  consumer: string,
  message: InboundMessage,
  raw: Message,
  outcome: DeadLetterOutcome,
  compact = false,
): SendMessageCommandInput {
  const record = deadLetterRecord(consumer, message, outcome);
  const recordHeaders = deadLetterHeaders(record);
  if (compact) {
    delete recordHeaders[HEADERS.errorStack];
    const errorMessage = recordHeaders[HEADERS.errorMessage];
    if (errorMessage !== undefined && errorMessage.length > COMPACT_ERROR_MESSAGE) {
      recordHeaders[HEADERS.errorMessage] = `${errorMessage.slice(0, COMPACT_ERROR_MESSAGE - 1)}…`;
    }
  }
  const groupId = raw.Attributes?.MessageGroupId;
  if (groupId !== undefined) recordHeaders[SQS_ATTRIBUTES.sourceMessageGroupId] = groupId;
  const headers: Record<string, string> = {};
  if (record.originalId !== undefined) headers[HEADERS.messageId] = record.originalId;
  headers[HEADERS.reason] = record.reason;
  headers[HEADERS.consumer] = record.consumer;
  headers[SQS_ATTRIBUTES.deadLetter] = JSON.stringify(recordHeaders);
  for (const [name, value] of Object.entries(compact ? {} : message.headers)) {
    if (name === HEADERS.messageId || name.startsWith('x-inboxkit-')) continue;
    headers[name] = value;
  }
  const input: SendMessageCommandInput = {
    QueueUrl: deadLetterQueueUrl,
    MessageBody: raw.Body ?? '',
    MessageAttributes: encodeMessageAttributes(headers, [
      HEADERS.reason,
      HEADERS.consumer,
      SQS_ATTRIBUTES.deadLetter,
    ]),
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
