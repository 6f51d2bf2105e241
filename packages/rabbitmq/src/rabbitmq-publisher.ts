// The RabbitMQ implementation of core's Publisher port: persistent, mandatory publishes on a confirm
// channel, resolved only once the broker confirmed and routed every message. It serves the DLQ path, the
// delay path, DLQ replay and the outbox relay.

import { ConfigurationError, HEADERS, injectTraceHeaders } from '@inboxkit/core';
import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import type { AmqpConfirmChannel } from './amqp-types.js';
import { confirmPublish } from './confirm-publish.js';
import type { RawPublish } from './confirm-publish.js';
import { fitsShortString } from './short-string.js';

/** Options of `rabbitmqPublisher`. */
export interface RabbitmqPublisherOptions {
  /** A confirm channel (`connection.createConfirmChannel()`). The publisher never closes it. */
  readonly channel: AmqpConfirmChannel;
  /** How long to wait for the broker's confirms of one `publish` call. Default is 30,000 ms. */
  readonly confirmTimeoutMs?: number;
}

/**
 * Converts an outgoing message to an AMQP publish: id as `message-id` header and, when it fits an AMQP short
 * string (255 bytes), as the `messageId` property too; `content-type` likewise as `contentType` when it fits.
 */
export function toRawPublish(message: OutgoingMessage): RawPublish {
  if (message.delayMs !== undefined && message.delayMs > 0) {
    throw new ConfigurationError(
      'rabbitmqPublisher cannot delay a message (`delayMs`): publish it to a delay queue declared by declareTopology',
    );
  }
  const headers: Record<string, unknown> = { ...injectTraceHeaders(message.headers), [HEADERS.messageId]: message.id };
  const contentType = message.headers?.['content-type'];
  return {
    exchange: message.destination,
    routingKey: message.routingKey ?? '',
    content: typeof message.body === 'string' ? Buffer.from(message.body, 'utf8') : Buffer.from(message.body),
    options: {
      ...(fitsShortString(message.id) ? { messageId: message.id } : {}),
      headers,
      ...(contentType !== undefined && fitsShortString(contentType) ? { contentType } : {}),
      // AMQP timestamps are seconds since the epoch.
      ...(message.timestamp ? { timestamp: Math.floor(message.timestamp.getTime() / 1000) } : {}),
    },
  };
}

/**
 * A publisher that resolves once RabbitMQ confirmed every message persistent and routed to a queue.
 * `destination` is the exchange (`''` for the default exchange, where the routing key is the queue name).
 * Rejects with a `PublishError` on a nack, an unroutable message, a closed channel or a confirm timeout;
 * the caller must then not settle its source message. `delayMs` is not supported (publish to a delay queue).
 *
 * @example
 * const publisher = rabbitmqPublisher({ channel: await connection.createConfirmChannel() });
 * await publisher.publish([{ destination: '', routingKey: 'orders', id: 'order-1', body: '{"total":3}' }]);
 */
export function rabbitmqPublisher(options: RabbitmqPublisherOptions): Publisher {
  const confirmTimeoutMs = options.confirmTimeoutMs ?? 30_000;
  if (!Number.isFinite(confirmTimeoutMs) || confirmTimeoutMs <= 0) {
    throw new ConfigurationError(
      `rabbitmqPublisher: \`confirmTimeoutMs\` must be a positive number, got ${confirmTimeoutMs}`,
    );
  }
  if (typeof options.channel?.publish !== 'function') {
    throw new ConfigurationError(
      'rabbitmqPublisher: `channel` must be a confirm channel (connection.createConfirmChannel())',
    );
  }
  const channel = options.channel;
  return Object.freeze({
    async publish(messages: readonly OutgoingMessage[]): Promise<void> {
      if (messages.length === 0) return;
      await confirmPublish(channel, messages.map(toRawPublish), confirmTimeoutMs);
    },
    async close(): Promise<void> {
      // The channel belongs to the caller.
    },
  });
}
