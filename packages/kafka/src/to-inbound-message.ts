// Turns a fetched kafkajs record into core's InboundMessage: lower-cased string headers, the message id
// resolved in a fixed order, source coordinates, the record timestamp and the replay marker.

import { HEADERS, nonEmptyText as nonEmpty, parseReplayMarker } from '@inboxkit/core';
import type { InboundMessage, Logger } from '@inboxkit/core';
import type { KafkaHeaders, KafkaMessageLike } from './kafka-client-types.js';

/** A fetched record as the `messageId` option sees it. */
export interface KafkaRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Lower-cased names, UTF-8 string values (the last value of a repeated header). */
  readonly headers: Readonly<Record<string, string>>;
  /** Milliseconds since the epoch, as a decimal string. */
  readonly timestamp: string;
}

/** How a record's message id is found. */
export interface MessageIdResolution {
  readonly messageId: ((record: KafkaRecord) => string | undefined) | undefined;
  readonly useCoordinatesAsId: boolean;
  readonly logger: Logger;
}

/**
 * Headers as lower-cased names with UTF-8 string values. Kafka allows a name to repeat; kafkajs then returns
 * an array and the last value wins, as in the Java client's `lastHeader`.
 */
export function decodeHeaders(headers: KafkaHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined) return out;
  for (const [name, raw] of Object.entries(headers)) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value === undefined) continue;
    out[name.toLowerCase()] = typeof value === 'string' ? value : value.toString('utf8');
  }
  return out;
}

/** `topic:partition:offset`, the coordinates fallback id. */
export function coordinatesId(topic: string, partition: number, offset: string): string {
  return `${topic}:${partition}:${offset}`;
}

/**
 * The message id: the `message-id` header, then CloudEvents `ce_id` (binary mode over Kafka), then the user's
 * `messageId` function, then — only when opted in — the record's coordinates. `undefined` when none applies;
 * core then dead-letters the record with reason `missing-id`.
 */
export function resolveMessageId(record: KafkaRecord, resolution: MessageIdResolution): string | undefined {
  const fromHeader =
    nonEmpty(record.headers[HEADERS.messageId]) ?? nonEmpty(record.headers[HEADERS.cloudEventsIdKafka]);
  if (fromHeader !== undefined) return fromHeader;
  if (resolution.messageId !== undefined) {
    try {
      const fromFunction = nonEmpty(resolution.messageId(record));
      if (fromFunction !== undefined) return fromFunction;
    } catch (error) {
      resolution.logger.warn(
        { err: error, topic: record.topic, partition: record.partition, offset: record.offset },
        'inboxkit: the messageId function threw; the record is treated as having no id',
      );
    }
  }
  return resolution.useCoordinatesAsId
    ? coordinatesId(record.topic, record.partition, record.offset)
    : undefined;
}

function timestampOf(value: string): Date | undefined {
  const ms = Number(value);
  return value !== '' && Number.isFinite(ms) && ms >= 0 ? new Date(ms) : undefined;
}

/** The record as core's `InboundMessage`. */
export function toInboundMessage(
  topic: string,
  partition: number,
  message: KafkaMessageLike,
  resolution: MessageIdResolution,
): InboundMessage {
  const headers = decodeHeaders(message.headers);
  const record: KafkaRecord = {
    topic,
    partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    headers,
    timestamp: message.timestamp,
  };
  const replay = parseReplayMarker(headers);
  const timestamp = timestampOf(message.timestamp);
  return {
    id: resolveMessageId(record, resolution),
    body: message.value,
    headers,
    ...(timestamp !== undefined ? { timestamp } : {}),
    ...(replay !== undefined ? { replay } : {}),
    source: {
      transport: 'kafka',
      destination: topic,
      partition,
      offset: message.offset,
      brokerMessageId: coordinatesId(topic, partition, message.offset),
    },
  };
}
