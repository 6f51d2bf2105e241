// The two copies a consumer publishes before it acks an original: the delayed retry copy (to a delay
// queue, carrying the attempts made so far) and the dead letter (to the DLX, carrying core's DLQ headers).
// Both keep the original body, headers and properties, so a replay or a retry is the same message.

import { deadLetterForms, deadLetterRecord, deliveryContext, HEADERS, injectTraceHeaders } from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage, RetryOutcome } from '@inboxkit/core';
import type { AmqpMessage, AmqpPublishOptions } from './amqp-types.js';
import type { RawPublish } from './confirm-publish.js';
import { delayBucketFor } from './declare-topology.js';
import type { DeclaredTopology } from './declare-topology.js';
import { fitsShortString } from './short-string.js';

/** Headers the broker owns or this package recomputes on every copy. */
function isBrokerOrCounterHeader(lowerName: string): boolean {
  return (
    lowerName === 'x-death' ||
    lowerName.startsWith('x-first-death-') ||
    lowerName.startsWith('x-last-death-') ||
    lowerName === 'x-delivery-count' ||
    lowerName === HEADERS.attempt
  );
}

/** A previous dead letter's facts (a replayed message failing again): replaced, never mixed with new ones. */
function isStaleDeadLetterHeader(lowerName: string): boolean {
  return lowerName.startsWith('x-inboxkit-') && !lowerName.startsWith('x-inboxkit-replay-');
}

/** The original's headers (raw AMQP values) without broker bookkeeping and attempt counters. */
function carriedHeaders(message: AmqpMessage, forDeadLetter = false): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(message.properties.headers ?? {})) {
    const lower = name.toLowerCase();
    if (isBrokerOrCounterHeader(lower) || (forDeadLetter && isStaleDeadLetterHeader(lower))) continue;
    out[name] = value;
  }
  return out;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * The original's AMQP properties worth keeping (not `userId`, which the broker checks, nor `expiration`). The id
 * goes in `messageId` only when it fits an AMQP short string (255 bytes); a longer one travels in the
 * `message-id` header (`idHeader`), which every reader consults next.
 */
function carriedProperties(message: AmqpMessage, id: string | undefined): AmqpPublishOptions {
  const p = message.properties;
  const out: AmqpPublishOptions = {};
  const messageId = id ?? str(p.messageId);
  if (messageId !== undefined && fitsShortString(messageId)) out.messageId = messageId;
  if (str(p.contentType) !== undefined) out.contentType = str(p.contentType)!;
  if (str(p.contentEncoding) !== undefined) out.contentEncoding = str(p.contentEncoding)!;
  if (str(p.correlationId) !== undefined) out.correlationId = str(p.correlationId)!;
  if (str(p.replyTo) !== undefined) out.replyTo = str(p.replyTo)!;
  if (str(p.type) !== undefined) out.type = str(p.type)!;
  if (str(p.appId) !== undefined) out.appId = str(p.appId)!;
  if (typeof p.priority === 'number') out.priority = p.priority;
  if (typeof p.timestamp === 'number') out.timestamp = p.timestamp;
  return out;
}

/** The `message-id` header of a copy whose id is too long for the `messageId` property, else nothing. */
function idHeader(id: string | undefined): Record<string, string> {
  return id === undefined || fitsShortString(id) ? {} : { [HEADERS.messageId]: id };
}

/**
 * The retry copy of `message` for `outcome`: published to the delay queue of the smallest bucket holding it at
 * least `delayMs`, with the attempts made so far in `x-inboxkit-attempt` and the original route in headers.
 */
export function retryCopy(
  message: AmqpMessage,
  inbound: InboundMessage,
  outcome: RetryOutcome,
  topology: DeclaredTopology,
): RawPublish {
  const bucket = delayBucketFor(topology.delayBucketsMs, outcome.delayMs);
  // Attempts made so far: the one that just failed, or (when the handler did not run, e.g. a lock timeout)
  // the deliveries before this one.
  const attempts = Math.max(outcome.attempt, (inbound.deliveryCount ?? 1) - 1);
  return {
    exchange: '',
    routingKey: topology.delayQueue(bucket),
    content: message.content,
    options: {
      ...carriedProperties(message, inbound.id),
      headers: {
        ...carriedHeaders(message),
        ...idHeader(inbound.id),
        [HEADERS.attempt]: String(attempts),
        [HEADERS.sourceExchange]: inbound.source.exchange ?? '',
        [HEADERS.sourceRoutingKey]: inbound.source.routingKey ?? '',
      },
      // Equal to the queue's TTL: the copy also expires if the queue was declared without one.
      expiration: String(bucket),
    },
  };
}

/**
 * The dead letter of `message` in each of core's forms (`deadLetterForms`), largest first: original body and
 * properties in every form; the original headers and the trace in `full` and `compact`; core's DLQ headers cut
 * down to the form. The consumer publishes the first one amqplib can encode (headers within 64 KiB).
 */
export function deadLetterCopies(
  consumerName: string,
  message: AmqpMessage,
  inbound: InboundMessage,
  outcome: DeadLetterOutcome,
  topology: DeclaredTopology,
): readonly RawPublish[] {
  const record = deadLetterRecord(consumerName, inbound, outcome);
  return deadLetterForms(record).map((spec) => ({
    exchange: topology.deadLetterExchange,
    routingKey: topology.deadLetterRoutingKey,
    content: message.content,
    options: {
      ...carriedProperties(message, spec.headers[HEADERS.messageId] ?? record.originalId),
      // The copy continues the delivery's trace (its `traceparent` replaces the original's).
      headers: {
        ...(spec.originalHeaders ? carriedHeaders(message, true) : {}),
        ...(spec.trace ? injectTraceHeaders(spec.headers, deliveryContext(inbound)) : spec.headers),
      },
    },
  }));
}
