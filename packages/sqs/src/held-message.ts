// A received SQS message while the consumer holds it: what the heartbeat keeps invisible, what core handles,
// and the receive count the attempt charger reads.

import type { Message } from '@aws-sdk/client-sqs';
import type { InboundMessage } from '@inboxkit/core';
import type { SqsConsumerConfig } from './sqs-consumer-options.js';
import { toInboundMessage } from './to-inbound-message.js';
import type { HeldMessage } from './visibility-heartbeat.js';

/** One received message while the consumer holds it. */
export interface Held extends HeldMessage {
  readonly raw: Message;
  readonly inbound: InboundMessage;
  /** SQS's `ApproximateReceiveCount` of this receive (1 on the first). */
  readonly receiveCount: number;
  /** A crash suspect (`AttemptCharger.suspects`): the attempts it has used so far; `undefined` for any other. */
  suspect: number | undefined;
}

/** `raw` as a held message received at `receivedAt`; `undefined` for a message SQS sent without a handle. */
export function heldMessage(config: SqsConsumerConfig, raw: Message, receivedAt: number): Held | undefined {
  if (raw.ReceiptHandle === undefined) return undefined;
  let inbound: InboundMessage;
  try {
    inbound = toInboundMessage(raw, config);
  } catch (error) {
    // Only a user's resolveMessageId can throw here: treat it as "no id" so the message is dead-lettered.
    config.logger.error({ error, sqsMessageId: raw.MessageId }, 'sqsConsumer: resolveMessageId threw');
    inbound = toInboundMessage(raw, { ...config, resolveMessageId: () => undefined });
  }
  const receiveCount = Number(raw.Attributes?.ApproximateReceiveCount);
  return {
    raw,
    inbound,
    receiveCount: Number.isInteger(receiveCount) && receiveCount > 0 ? receiveCount : 1,
    receiptHandle: raw.ReceiptHandle,
    messageId: raw.MessageId,
    extendedAt: receivedAt,
    extending: undefined,
    suspect: undefined,
  };
}
