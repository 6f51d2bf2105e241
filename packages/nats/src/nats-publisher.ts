// The JetStream implementation of core's Publisher port: `js.publish` with the message id as `msgID` (the
// `Nats-Msg-Id` header, JetStream's de-duplication key), resolved only once the stream acknowledged every
// message stored. It serves the dead-letter path, DLQ replay and the outbox relay.

import { randomUUID } from 'node:crypto';

import {
  ConfigurationError,
  HEADERS,
  injectTraceHeaders,
  MessageTooLargeError,
  PublishError,
} from '@inboxkit/core';
import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import { jetstream } from '@nats-io/jetstream';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

import { writeHeaders } from './nats-headers.js';

/** The header that carries `OutgoingMessage.timestamp` (epoch ms): JetStream stamps each copy with its own time. */
export const NATS_TIMESTAMP_HEADER = 'x-inboxkit-timestamp';

/** Options of `natsPublisher`. */
export interface NatsPublisherOptions {
  /** A connection (`connect()` of `@nats-io/transport-node`). The publisher never closes it. */
  readonly connection: NatsConnection;
  /** How long to wait for the stream's acknowledgement of one message. Default is 30,000 ms. */
  readonly ackTimeoutMs?: number;
}

/** The NATS headers, body and options of one outgoing message. Exported for the consumer's dead-letter path. */
export function toNatsPublish(message: OutgoingMessage): {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Record<string, string>;
} {
  if (message.delayMs !== undefined && message.delayMs > 0) {
    throw new ConfigurationError(
      'natsPublisher cannot delay a message (`delayMs`): JetStream delivers what it stores; retry with nak(delay) on the consumer',
    );
  }
  if (typeof message.destination !== 'string' || message.destination === '') {
    throw new ConfigurationError('natsPublisher: `destination` must be a subject, got an empty value');
  }
  const headers: Record<string, string> = {};
  // JetStream's own headers (Nats-Msg-Id, Nats-Expected-*) are the publisher's to set: a copied one (a replayed
  // dead letter's) would override the id or fail the publish.
  for (const [name, value] of Object.entries(injectTraceHeaders(message.headers))) {
    if (!name.toLowerCase().startsWith('nats-')) headers[name] = value;
  }
  headers[HEADERS.messageId] = message.id;
  if (message.timestamp !== undefined) headers[NATS_TIMESTAMP_HEADER] = String(message.timestamp.getTime());
  const data = typeof message.body === 'string' ? new TextEncoder().encode(message.body) : message.body;
  return { subject: message.destination, data, headers };
}

/**
 * True for a refusal of a message as too large, on every attempt: the server's `max_payload`, or a stream's
 * `max_msg_size` (JetStream error 10054, "message size exceeds maximum allowed").
 */
function isPayloadTooLarge(error: unknown): boolean {
  const text = error instanceof Error ? `${error.name} ${error.message}` : String(error);
  if (/max(imum)?[ _]payload|payload.*exceed|message size exceeds maximum/i.test(text)) return true;
  const api = (error as { api_error?: { err_code?: unknown } } | undefined)?.api_error;
  return api?.err_code === 10054;
}

/** One JetStream publish as the publisher and the consumer's dead-letter path send it. */
export interface NatsPublish {
  readonly subject: string;
  readonly data: Uint8Array;
  /** Written as they are (the caller has left out JetStream's own). */
  readonly headers: Readonly<Record<string, string>>;
  /** JetStream's de-duplication id (`Nats-Msg-Id`). */
  readonly msgID: string;
  /** Names the message in errors (its inboxkit id, when it has one). */
  readonly label: string;
}

/**
 * Publishes and waits for the stream's acknowledgement. Rejects with a `MessageTooLargeError` above the server's
 * `max_payload`, and a `PublishError` when no stream acknowledged it (none captures the subject, a timeout).
 */
export async function publishAcknowledged(
  js: JetStreamClient,
  connection: NatsConnection,
  p: NatsPublish,
  ackTimeoutMs: number,
): Promise<void> {
  const maxPayload = connection.info?.max_payload;
  if (maxPayload !== undefined && p.data.length > maxPayload) {
    throw new MessageTooLargeError(
      `natsPublisher: message ${p.label} has ${p.data.length} bytes, above the server's max_payload (${maxPayload})`,
      { messageId: p.label },
    );
  }
  try {
    await js.publish(p.subject, p.data, {
      msgID: p.msgID,
      headers: writeHeaders(p.headers),
      timeout: ackTimeoutMs,
    });
  } catch (error) {
    if (isPayloadTooLarge(error)) {
      throw new MessageTooLargeError(`natsPublisher: the server refused message ${p.label} as too large`, {
        messageId: p.label,
        cause: error,
      });
    }
    throw new PublishError(
      `natsPublisher: JetStream did not acknowledge message ${p.label} on ${p.subject}: ${
        error instanceof Error ? error.message : String(error)
      }`,
      { cause: error },
    );
  }
}

/**
 * The `Nats-Msg-Id` of a publish: the message id, so JetStream drops a producer's re-send within its duplicate
 * window. A replay (`x-inboxkit-replay-id`, set by `inboxkit dlq replay`) must reach the consumer however soon it
 * follows the original, and so must each of several dead letters of one id replayed in one run (two copies a
 * producer sent, both dead-lettered): its `msgID` is unique, `<id>~replay~<replay id>~<random>`. A replay publish
 * retried after a lost acknowledgement may then be stored twice; the inbox answers the second a `duplicate`. The
 * consumer reads the id from `message-id`, which stays the message id.
 */
export function msgIdOf(id: string, headers: Readonly<Record<string, string>>): string {
  const replayId = headers[HEADERS.replayId];
  return replayId === undefined ? id : `${id}~replay~${replayId}~${randomUUID()}`;
}

/** Publishes one outgoing message (its id as `msgID`) and waits for the stream's acknowledgement. */
export async function publishConfirmed(
  js: JetStreamClient,
  connection: NatsConnection,
  message: OutgoingMessage,
  ackTimeoutMs: number,
): Promise<void> {
  const { subject, data, headers } = toNatsPublish(message);
  await publishAcknowledged(
    js,
    connection,
    { subject, data, headers, msgID: msgIdOf(message.id, headers), label: JSON.stringify(message.id) },
    ackTimeoutMs,
  );
}

/**
 * A publisher that resolves once JetStream acknowledged every message stored in a stream. `destination` is
 * the subject (a stream must capture it: without one the publish fails with "no responders", a `PublishError`).
 * The id goes out as `msgID` (`Nats-Msg-Id`, so JetStream drops a re-send within the stream's duplicate
 * window) and as the `message-id` header. `timestamp` becomes the `x-inboxkit-timestamp` header (epoch ms).
 * Rejects with a `PublishError` (no acknowledgement: the caller must not settle its source message) or a
 * `MessageTooLargeError` (above the server's `max_payload`). `delayMs` is not supported.
 *
 * @example
 * const publisher = natsPublisher({ connection: await connect({ servers: process.env.NATS_URL }) });
 * await publisher.publish([{ destination: 'orders.created', id: 'order-1', body: '{"total":3}' }]);
 */
export function natsPublisher(options: NatsPublisherOptions): Publisher {
  const ackTimeoutMs = options.ackTimeoutMs ?? 30_000;
  if (!Number.isFinite(ackTimeoutMs) || ackTimeoutMs <= 0) {
    throw new ConfigurationError(
      `natsPublisher: \`ackTimeoutMs\` must be a positive number, got ${ackTimeoutMs}`,
    );
  }
  if (typeof options.connection?.publish !== 'function') {
    throw new ConfigurationError(
      'natsPublisher: `connection` must be a NatsConnection (connect() of @nats-io/transport-node)',
    );
  }
  const connection = options.connection;
  const js = jetstream(connection);
  return Object.freeze({
    async publish(messages: readonly OutgoingMessage[]): Promise<void> {
      // In order, each acknowledged before the next: a failure leaves the rest unsent, and the caller retries all
      // (the stream's duplicate window drops the ones already stored).
      for (const message of messages) await publishConfirmed(js, connection, message, ackTimeoutMs);
    },
    async close(): Promise<void> {
      // The connection belongs to the caller.
    },
  });
}
