// A JetStream message as core's InboundMessage: the id from `message-id`, else `Nats-Msg-Id`, else the
// CloudEvents id, lower-cased headers, the stream position as source coordinates. No `deliveryCount` is passed
// to core: JetStream's count also rises for deliveries that never ran (an ack wait that ran out while the
// message waited in a stopped or crashed process), and core must count attempts only — the consumer records a
// started attempt before a redelivery runs instead (see nats-consumer.ts).

import { HEADERS, parseReplayMarker, producerTimestampMs } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import type { JsMsg } from '@nats-io/jetstream';

import { NATS_MSG_ID_HEADER, readHeaders } from './nats-headers.js';
import { NATS_TIMESTAMP_HEADER } from './nats-publisher.js';

/** The transport name in source coordinates, DLQ headers and metrics. */
export const NATS_TRANSPORT = 'nats';

/**
 * The message id: the `message-id` header (what inboxkit's publishers write), then `Nats-Msg-Id` (JetStream's
 * de-duplication id, what a plain `js.publish(…, { msgID })` writes), then a binary-mode
 * CloudEvents id (`ce-id`, `ce_id`), then the `id` of a structured-mode CloudEvents JSON body. `undefined` when
 * none is present: core dead-letters the message as `missing-id`.
 */
export function natsMessageId(
  headers: Readonly<Record<string, string>>,
  body: Uint8Array,
): string | undefined {
  const fromHeader =
    headers[HEADERS.messageId] ??
    headers[NATS_MSG_ID_HEADER.toLowerCase()] ??
    headers[HEADERS.cloudEventsId] ??
    headers[HEADERS.cloudEventsIdKafka];
  if (fromHeader !== undefined && fromHeader !== '') return fromHeader;
  // Structured-mode CloudEvents: a JSON object with `specversion` and `id`.
  if (body.length === 0 || body[0] !== 0x7b /* { */) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(body).toString('utf8'));
    if (typeof value !== 'object' || value === null) return undefined;
    const event = value as { specversion?: unknown; id?: unknown };
    return typeof event.specversion === 'string' && typeof event.id === 'string' ? event.id : undefined;
  } catch {
    return undefined;
  }
}

/** Converts one JetStream delivery. `stream` names the stream in the source coordinates. */
export function toInboundMessage(msg: JsMsg): InboundMessage {
  const headers = readHeaders(msg.headers);
  const body = msg.data;
  const replay = parseReplayMarker(headers);
  // The producer's own time (natsPublisher's `x-inboxkit-timestamp`, epoch ms) first, else the stream's.
  const timestampMs =
    producerTimestampMs(headers[NATS_TIMESTAMP_HEADER]) ?? Math.floor(msg.info.timestampNanos / 1_000_000);
  return {
    id: natsMessageId(headers, body),
    body,
    headers,
    ...(Number.isFinite(timestampMs) && timestampMs > 0 ? { timestamp: new Date(timestampMs) } : {}),
    ...(replay !== undefined ? { replay } : {}),
    source: {
      transport: NATS_TRANSPORT,
      // The subject: what a replay publishes back to. The stream and sequence name the copy.
      destination: msg.subject,
      offset: String(msg.info.streamSequence),
      brokerMessageId: `${msg.info.stream}:${msg.info.streamSequence}`,
    },
  };
}
