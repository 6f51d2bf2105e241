// Turns an amqplib delivery into core's InboundMessage: lower-cased string headers, the message id by the
// documented precedence, the attempts carried by a retry copy, the producer's timestamp and the source
// coordinates.

import { createHash } from 'node:crypto';
import { HEADERS, nonEmptyText as nonEmpty, parseReplayMarker, positiveIntegerText } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import type { AmqpMessage } from './amqp-types.js';

/** How a consumer finds a delivery's id when no header carries one. */
export interface MessageIdOptions {
  /** Called when neither the `messageId` property nor a `message-id` / `ce-id` header is set. */
  readonly messageId?: ((message: AmqpMessage) => string | undefined) | undefined;
  /** Falls back to `sha256:<hex of the body>`. */
  readonly contentIdFallback?: boolean | undefined;
}

function headerValue(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'object' && (value as { '!'?: unknown })['!'] === 'timestamp') {
    const seconds = Number((value as { value?: unknown }).value);
    return Number.isFinite(seconds) ? new Date(seconds * 1000).toISOString() : undefined;
  }
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** AMQP headers as core wants them: lower-cased names, string values (tables and arrays as JSON). */
export function stringHeaders(
  headers: Readonly<Record<string, unknown>> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers) return out;
  for (const [name, raw] of Object.entries(headers)) {
    const value = headerValue(raw);
    if (value !== undefined) out[name.toLowerCase()] = value;
  }
  return out;
}

/**
 * The message id: the AMQP `messageId` property, then the `message-id` header, then a CloudEvents id header
 * (`ce-id`, `ce_id`), then `options.messageId` (a throw counts as no id), then (opt-in) a hash of the body;
 * `undefined` if none.
 */
export function resolveMessageId(
  message: AmqpMessage,
  headers: Readonly<Record<string, string>>,
  options: MessageIdOptions,
): string | undefined {
  const found =
    nonEmpty(message.properties.messageId) ??
    nonEmpty(headers[HEADERS.messageId]) ??
    nonEmpty(headers[HEADERS.cloudEventsId]) ??
    nonEmpty(headers[HEADERS.cloudEventsIdKafka]);
  if (found !== undefined) return found;
  if (options.messageId) {
    let fromUser: string | undefined;
    try {
      fromUser = nonEmpty(options.messageId(message));
    } catch {
      // A throwing id function is treated as "no id": the message is dead-lettered as missing-id, not lost.
    }
    if (fromUser !== undefined) return fromUser;
  }
  if (options.contentIdFallback)
    return `sha256:${createHash('sha256').update(message.content).digest('hex')}`;
  return undefined;
}

/**
 * The attempt this delivery would be by what the message carries: the attempts made before it, recorded on a
 * delay-queue copy (`x-inboxkit-attempt`), plus one. Not a quorum queue's `x-delivery-count`: the broker raises
 * it for every unacked message a closed channel returns — prefetched ones that never ran, every message in
 * flight at a broker restart — so it counts deliveries, not attempts. (A message that kills its process is
 * counted by the started attempt recorded before each redelivery runs; see `rabbitmqConsumer`.)
 */
export function deliveryCountOf(headers: Readonly<Record<string, string>>): number {
  return (positiveIntegerText(headers[HEADERS.attempt]) ?? 0) + 1;
}

/**
 * The producer's timestamp: the AMQP `timestamp` property (seconds by the spec; values that can only be
 * milliseconds are read as such), else a CloudEvents `ce-time` header.
 */
export function timestampOf(
  message: AmqpMessage,
  headers: Readonly<Record<string, string>>,
): Date | undefined {
  const ts = message.properties.timestamp;
  if (typeof ts === 'number' && Number.isFinite(ts) && ts > 0) return new Date(ts > 1e11 ? ts : ts * 1000);
  const ceTime = headers['ce-time'] ?? headers['ce_time'];
  if (ceTime !== undefined) {
    const d = new Date(ceTime);
    if (!Number.isNaN(d.getTime())) return d;
  }
  return undefined;
}

/** Builds the InboundMessage core handles from one delivery on `queue`. */
export function toInboundMessage(
  message: AmqpMessage,
  queue: string,
  options: MessageIdOptions,
): InboundMessage {
  const headers = stringHeaders(message.properties.headers);
  const timestamp = timestampOf(message, headers);
  const replay = parseReplayMarker(headers);
  return {
    id: resolveMessageId(message, headers, options),
    body: message.content,
    headers,
    ...(timestamp ? { timestamp } : {}),
    deliveryCount: deliveryCountOf(headers),
    ...(replay ? { replay } : {}),
    source: {
      transport: 'rabbitmq',
      destination: queue,
      // A delay-queue copy arrives from the default exchange; the original route travels in headers.
      exchange: headers[HEADERS.sourceExchange] ?? message.fields.exchange,
      routingKey: headers[HEADERS.sourceRoutingKey] ?? message.fields.routingKey,
      brokerMessageId: String(message.fields.deliveryTag),
    },
  };
}
