// The facts a dead letter carries, and their one wire form as headers. Every transport writes the same
// header names (SQS, limited to 10 attributes, packs them into one JSON attribute) so the CLI reads any DLQ.

import type { InboundMessage, ReplayMarker, SourceCoordinates } from './message.js';
import type { DeadLetterOutcome, ErrorInfo } from './outcome.js';
import { clipText, recordableDate, recordableText } from './recordable.js';

/** Header names inboxkit writes and reads. All lower-case. */
export const HEADERS = {
  /** The producer's message id. Transports read it first (after a broker-native id property). */
  messageId: 'message-id',
  /** CloudEvents id, binary mode over Kafka (`ce_id`) and AMQP/HTTP (`ce-id`). */
  cloudEventsIdKafka: 'ce_id',
  cloudEventsId: 'ce-id',
  originalId: 'x-inboxkit-original-id',
  consumer: 'x-inboxkit-consumer',
  reason: 'x-inboxkit-reason',
  attempts: 'x-inboxkit-attempts',
  errorName: 'x-inboxkit-error-name',
  errorMessage: 'x-inboxkit-error-message',
  errorCode: 'x-inboxkit-error-code',
  errorStack: 'x-inboxkit-error-stack',
  firstFailureAt: 'x-inboxkit-first-failure-at',
  lastFailureAt: 'x-inboxkit-last-failure-at',
  deadLetteredAt: 'x-inboxkit-dead-lettered-at',
  /**
   * On a dead letter sent in a smaller form (too large for the broker in full): what it lacks, comma-separated
   * (`error-stack`, `error-message`, `error-code`, `original-headers`, `trace`, `message-id-clipped`, …).
   */
  dropped: 'x-inboxkit-dropped',
  sourceTransport: 'x-inboxkit-source-transport',
  sourceDestination: 'x-inboxkit-source-destination',
  sourcePartition: 'x-inboxkit-source-partition',
  sourceOffset: 'x-inboxkit-source-offset',
  sourceExchange: 'x-inboxkit-source-exchange',
  sourceRoutingKey: 'x-inboxkit-source-routing-key',
  /** The attempt count a transport carries on a delayed retry copy (RabbitMQ delay path). */
  attempt: 'x-inboxkit-attempt',
  replayId: 'x-inboxkit-replay-id',
  replayBy: 'x-inboxkit-replay-by',
  replayAt: 'x-inboxkit-replay-at',
} as const;

/** Everything known about one dead letter. */
export interface DeadLetterRecord {
  readonly originalId: string | undefined;
  readonly consumer: string;
  readonly reason: string;
  readonly attempts: number;
  readonly error: ErrorInfo | undefined;
  readonly firstFailureAt: Date | undefined;
  readonly lastFailureAt: Date | undefined;
  readonly deadLetteredAt: Date;
  readonly source: SourceCoordinates;
}

/** Builds the record for a dead-letter outcome of `message` in consumer `consumer`. */
export function deadLetterRecord(
  consumer: string,
  message: InboundMessage,
  outcome: DeadLetterOutcome,
  now: Date = new Date(),
): DeadLetterRecord {
  return {
    originalId: outcome.messageId ?? message.id,
    consumer,
    reason: outcome.reason,
    attempts: outcome.attempts,
    error: outcome.error,
    firstFailureAt: outcome.firstFailureAt,
    lastFailureAt: outcome.lastFailureAt,
    deadLetteredAt: now,
    source: message.source,
  };
}

const MAX_HEADER_VALUE = 4_000;

/** An error field as a header value: at most 4,000 characters, recordable (no lone surrogate, no NUL). */
function clip(value: string): string {
  return recordableText(clipText(value, MAX_HEADER_VALUE));
}

/**
 * The record as headers (string values, documented names). The message id header is set to the original id,
 * so a replay keeps it. Every value is well-formed Unicode without NUL (lone surrogates and NUL become U+FFFD),
 * so every broker's header encoding takes it.
 */
export function deadLetterHeaders(record: DeadLetterRecord): Record<string, string> {
  const h = rawDeadLetterHeaders(record);
  for (const [name, value] of Object.entries(h)) h[name] = recordableText(value);
  return h;
}

function rawDeadLetterHeaders(record: DeadLetterRecord): Record<string, string> {
  const h: Record<string, string> = {
    [HEADERS.consumer]: record.consumer,
    [HEADERS.reason]: record.reason,
    [HEADERS.attempts]: String(record.attempts),
    [HEADERS.deadLetteredAt]: record.deadLetteredAt.toISOString(),
    [HEADERS.sourceTransport]: record.source.transport,
  };
  if (record.originalId !== undefined) {
    h[HEADERS.originalId] = record.originalId;
    h[HEADERS.messageId] = record.originalId;
  }
  const s = record.source;
  if (s.destination !== undefined) h[HEADERS.sourceDestination] = s.destination;
  if (s.partition !== undefined) h[HEADERS.sourcePartition] = String(s.partition);
  if (s.offset !== undefined) h[HEADERS.sourceOffset] = s.offset;
  if (s.exchange !== undefined) h[HEADERS.sourceExchange] = s.exchange;
  if (s.routingKey !== undefined) h[HEADERS.sourceRoutingKey] = s.routingKey;
  if (record.error) {
    h[HEADERS.errorName] = clip(record.error.name);
    h[HEADERS.errorMessage] = clip(record.error.message);
    if (record.error.code !== undefined) h[HEADERS.errorCode] = clip(record.error.code);
    if (record.error.stack !== undefined) h[HEADERS.errorStack] = clip(record.error.stack);
  }
  if (record.firstFailureAt) h[HEADERS.firstFailureAt] = record.firstFailureAt.toISOString();
  if (record.lastFailureAt) h[HEADERS.lastFailureAt] = record.lastFailureAt.toISOString();
  return h;
}

function date(value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/**
 * Reads a record back from DLQ headers (names matched case-insensitively). Returns `undefined` when the
 * headers were not written by inboxkit (no consumer or reason header).
 */
export function parseDeadLetterHeaders(headers: Readonly<Record<string, string>>): DeadLetterRecord | undefined {
  const get = (name: string): string | undefined => {
    for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
    return undefined;
  };
  const consumer = get(HEADERS.consumer);
  const reason = get(HEADERS.reason);
  if (consumer === undefined || reason === undefined) return undefined;
  const errorName = get(HEADERS.errorName);
  const partition = get(HEADERS.sourcePartition);
  const error: ErrorInfo | undefined =
    errorName === undefined
      ? undefined
      : {
          name: errorName,
          message: get(HEADERS.errorMessage) ?? '',
          ...(get(HEADERS.errorCode) !== undefined ? { code: get(HEADERS.errorCode)! } : {}),
          ...(get(HEADERS.errorStack) !== undefined ? { stack: get(HEADERS.errorStack)! } : {}),
        };
  const source: SourceCoordinates = {
    transport: get(HEADERS.sourceTransport) ?? 'unknown',
    ...(get(HEADERS.sourceDestination) !== undefined ? { destination: get(HEADERS.sourceDestination)! } : {}),
    ...(partition !== undefined && /^\d+$/.test(partition) ? { partition: Number(partition) } : {}),
    ...(get(HEADERS.sourceOffset) !== undefined ? { offset: get(HEADERS.sourceOffset)! } : {}),
    ...(get(HEADERS.sourceExchange) !== undefined ? { exchange: get(HEADERS.sourceExchange)! } : {}),
    ...(get(HEADERS.sourceRoutingKey) !== undefined ? { routingKey: get(HEADERS.sourceRoutingKey)! } : {}),
  };
  const attempts = Number(get(HEADERS.attempts) ?? '0');
  return {
    originalId: get(HEADERS.originalId) ?? get(HEADERS.messageId),
    consumer,
    reason,
    attempts: Number.isFinite(attempts) ? attempts : 0,
    error,
    firstFailureAt: date(get(HEADERS.firstFailureAt)),
    lastFailureAt: date(get(HEADERS.lastFailureAt)),
    deadLetteredAt: date(get(HEADERS.deadLetteredAt)) ?? new Date(0),
    source,
  };
}

/** Headers that mark a delivery as an explicit replay. */
export function replayHeaders(marker: ReplayMarker): Record<string, string> {
  const h: Record<string, string> = { [HEADERS.replayId]: marker.replayId };
  if (marker.requestedBy !== undefined) h[HEADERS.replayBy] = marker.requestedBy;
  h[HEADERS.replayAt] = (marker.requestedAt ?? new Date()).toISOString();
  return h;
}

/** Reads a replay marker from headers; `undefined` when the delivery is not a replay. */
export function parseReplayMarker(headers: Readonly<Record<string, string>>): ReplayMarker | undefined {
  const replayId = headers[HEADERS.replayId];
  if (replayId === undefined || replayId === '') return undefined;
  const by = headers[HEADERS.replayBy];
  const at = recordableDate(date(headers[HEADERS.replayAt]));
  // Recorded in the replay audit and the inbox row: made recordable like every other header value.
  return {
    replayId: recordableText(replayId),
    ...(by !== undefined ? { requestedBy: recordableText(by) } : {}),
    ...(at ? { requestedAt: at } : {}),
  };
}
