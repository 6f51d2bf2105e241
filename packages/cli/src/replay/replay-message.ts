// Turns a dead letter back into the message its source saw: same id, same body, the original headers, plus
// the replay marker the inbox needs to reopen a dead-lettered row.

import { HEADERS, replayHeaders } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterRecord, OutgoingMessage, ReplayMarker } from '@inboxkit/core';

/** Where a replayed message goes. */
export interface ReplayDestination {
  /** Kafka topic, RabbitMQ exchange (`''` = the default exchange), SQS queue URL. */
  readonly destination: string;
  readonly routingKey?: string;
  /** Human-readable form for output (`orders`, `queue orders`, `exchange events / key order.created`). */
  readonly label: string;
}

/**
 * The source to publish a dead letter back to: `to` when given, else the source coordinates in its headers.
 * RabbitMQ replays go to the source *queue* through the default exchange rather than to the original
 * exchange, so other queues bound to that exchange do not receive a second copy. Returns a string saying
 * what is missing when no destination can be found.
 */
export function replayDestination(
  transport: string,
  record: DeadLetterRecord | undefined,
  to: string | undefined,
): ReplayDestination | string {
  if (transport === 'rabbitmq') {
    if (to !== undefined) return { destination: '', routingKey: to, label: `queue ${to}` };
    const source = record?.source;
    if (source?.transport === 'rabbitmq' && source.destination !== undefined && source.destination !== '') {
      return { destination: '', routingKey: source.destination, label: `queue ${source.destination}` };
    }
    if (source?.transport === 'rabbitmq' && source.exchange !== undefined) {
      const key = source.routingKey ?? '';
      return {
        destination: source.exchange,
        routingKey: key,
        label: `exchange ${source.exchange} / key ${key}`,
      };
    }
    return 'no source queue in the dead letter headers: pass --to QUEUE';
  }
  if (to !== undefined) return { destination: to, label: to };
  const source = record?.source;
  if (source === undefined) return 'not an inboxkit dead letter (no x-inboxkit-* headers): pass --to';
  if (source.transport !== transport) {
    return `dead-lettered from a ${source.transport} source, read from a ${transport} DLQ: pass --to`;
  }
  if (source.destination === undefined || source.destination === '') {
    return 'no source destination in the dead letter headers: pass --to';
  }
  return { destination: source.destination, label: source.destination };
}

/**
 * True for headers that are not the producer's: inboxkit's own (dead letter facts, an earlier replay marker,
 * the id header, which the publisher writes from `id`) and the broker's bookkeeping (RabbitMQ's `x-death`
 * family and the quorum queue's `x-delivery-count`, which browsing the DLQ raises). Carried into the replay,
 * a delivery count would count as attempts already made.
 */
function isNotProducerHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    lower.startsWith('x-inboxkit-') ||
    lower === HEADERS.messageId ||
    lower === 'x-delivery-count' ||
    lower === 'x-death' ||
    lower.startsWith('x-first-death-') ||
    lower.startsWith('x-last-death-') ||
    lower === 'x-received-from'
  );
}

/**
 * The message to publish: the original id, body and key, the producer's headers (without inboxkit's
 * dead-letter headers and the broker's bookkeeping), and the replay marker.
 */
export function replayMessage(
  entry: DeadLetterEntry & { readonly key?: string | undefined },
  id: string,
  destination: ReplayDestination,
  marker: ReplayMarker,
): OutgoingMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(entry.headers)) {
    if (!isNotProducerHeader(name)) headers[name] = value;
  }
  Object.assign(headers, replayHeaders(marker));
  return {
    destination: destination.destination,
    ...(destination.routingKey !== undefined ? { routingKey: destination.routingKey } : {}),
    id,
    body: entry.body ?? '',
    headers,
    // The Kafka record key / SQS FIFO group, where the reader found one. No timestamp: a reader knows when the
    // dead letter was written, not when the producer sent the message, and the late-message rule must not
    // take one for the other.
    ...(entry.key !== undefined ? { key: entry.key } : {}),
  };
}
