// One received SQS message as core's InboundMessage: headers from message attributes, the producer's id and
// the producer's timestamp (else the send time). Not the receive count: it counts receives, not attempts (see
// sqsConsumer's started attempts).

import type { Message } from '@aws-sdk/client-sqs';
import {
  parseReplayMarker,
  positiveIntegerText as positiveInteger,
  producerTimestampMs,
} from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { decodeMessageAttributes, SQS_ATTRIBUTES } from './message-attributes.js';
import { resolveMessageId } from './message-id.js';
import type { MessageIdResolution } from './message-id.js';

/** How a received message is turned into an InboundMessage. */
export interface InboundMessageOptions extends MessageIdResolution {
  readonly queueUrl: string;
  /** Replaces the built-in id resolution when given. */
  readonly resolveMessageId: ((message: Message) => string | undefined) | undefined;
}

/**
 * Builds the InboundMessage core handles for `message`. Its timestamp is the `x-inboxkit-timestamp` attribute
 * when valid (a time fixed by the producer, the same on every resend), else SentTimestamp (stamped per send).
 */
export function toInboundMessage(message: Message, options: InboundMessageOptions): InboundMessage {
  const headers = decodeMessageAttributes(message.MessageAttributes);
  const id =
    options.resolveMessageId !== undefined
      ? options.resolveMessageId(message)
      : resolveMessageId(headers, message.Body, message.MessageId, options);
  // A malformed attribute is ignored (core's producerTimestampMs), never fatal.
  const sent =
    producerTimestampMs(headers[SQS_ATTRIBUTES.timestamp]) ??
    positiveInteger(message.Attributes?.SentTimestamp);
  return {
    id,
    body: message.Body ?? null,
    headers,
    timestamp: sent === undefined ? undefined : new Date(sent),
    replay: parseReplayMarker(headers),
    source: { transport: 'sqs', destination: options.queueUrl, brokerMessageId: message.MessageId },
  };
}
