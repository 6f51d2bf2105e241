// One received SQS message as core's InboundMessage: headers from message attributes, the producer's id and
// the send time. Not the receive count: it counts receives, not attempts (see sqsConsumer's started attempts).

import type { Message } from '@aws-sdk/client-sqs';
import { parseReplayMarker } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { decodeMessageAttributes } from './message-attributes.js';
import { resolveMessageId } from './message-id.js';
import type { MessageIdResolution } from './message-id.js';

/** How a received message is turned into an InboundMessage. */
export interface InboundMessageOptions extends MessageIdResolution {
  readonly queueUrl: string;
  /** Replaces the built-in id resolution when given. */
  readonly resolveMessageId: ((message: Message) => string | undefined) | undefined;
}

function positiveInteger(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/** Builds the InboundMessage core handles for `message`. */
export function toInboundMessage(message: Message, options: InboundMessageOptions): InboundMessage {
  const headers = decodeMessageAttributes(message.MessageAttributes);
  const id =
    options.resolveMessageId !== undefined
      ? options.resolveMessageId(message)
      : resolveMessageId(headers, message.Body, message.MessageId, options);
  const sent = positiveInteger(message.Attributes?.SentTimestamp);
  return {
    id,
    body: message.Body ?? null,
    headers,
    timestamp: sent === undefined ? undefined : new Date(sent),
    replay: parseReplayMarker(headers),
    source: { transport: 'sqs', destination: options.queueUrl, brokerMessageId: message.MessageId },
  };
}
