// The Kafka implementation of core's Publisher port: produce with acks from all in-sync replicas, the message
// id as the `message-id` header, the key as the partition key. Serves DLQ replay and the outbox relay.

import { ConfigurationError, HEADERS, injectTraceHeaders, PublishError } from '@inboxkit/core';
import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import type { KafkaClientLike, KafkaProducerLike } from './kafka-client-types.js';
import { positiveInteger } from './config-checks.js';
import { sendConfirmed } from './send-confirmed.js';
import type { TopicRecords } from './send-confirmed.js';

/** Options of `kafkaPublisher()`: pass either a connected producer or the client to create one from. */
export type KafkaPublisherOptions =
  | {
      /**
       * A producer the application created and connected; `close()` leaves it connected. Make it idempotent
       * (`kafka.producer({ idempotent: true })`) so the client's own retries cannot write a record twice.
       */
      readonly producer: KafkaProducerLike;
      readonly kafka?: undefined;
      /** How long the broker may take to confirm a produce. Default is 30,000 ms. */
      readonly timeoutMs?: number;
    }
  | {
      /** The client: the publisher creates an idempotent producer from it, connects it on first use, and disconnects it on `close()`. */
      readonly kafka: KafkaClientLike;
      readonly producer?: undefined;
      /** How long the broker may take to confirm a produce. Default is 30,000 ms. */
      readonly timeoutMs?: number;
    };

/**
 * A `Publisher` that resolves only once Kafka confirmed every message with `acks: -1`. Messages are grouped by
 * `destination` (the topic) in one `sendBatch`; `id` becomes the `message-id` header, `key` the record key.
 * Kafka has no delivery delay: a message with `delayMs > 0` is rejected with a `ConfigurationError`.
 *
 * @example
 * const publisher = kafkaPublisher({ kafka });
 * await publisher.publish([{ destination: 'payments', id: 'pay-42', key: 'acct-7', body: JSON.stringify(payment) }]);
 * await publisher.close();
 */
export function kafkaPublisher(options: KafkaPublisherOptions): Publisher {
  return new KafkaPublisher(options);
}

class KafkaPublisher implements Publisher {
  readonly #timeoutMs: number;
  readonly #kafka: KafkaClientLike | undefined;
  #producer: KafkaProducerLike | undefined;
  #connecting: Promise<KafkaProducerLike> | undefined;
  /** The producer `#connecting` resolved to, once it did (only for a producer this publisher created). */
  #created: KafkaProducerLike | undefined;
  #closed = false;

  constructor(options: KafkaPublisherOptions) {
    if (options.producer === undefined && options.kafka === undefined) {
      throw new ConfigurationError(
        'kafkaPublisher needs `producer` (a connected kafkajs producer) or `kafka` (a kafkajs client)',
      );
    }
    this.#timeoutMs = positiveInteger('kafkaPublisher timeoutMs', options.timeoutMs, 30_000);
    this.#producer = options.producer;
    this.#kafka = options.producer === undefined ? options.kafka : undefined;
  }

  async publish(messages: readonly OutgoingMessage[]): Promise<void> {
    if (this.#closed) throw new PublishError('kafkaPublisher is closed');
    const byTopic = new Map<string, TopicRecords>();
    for (const message of messages) {
      if (message.delayMs !== undefined && message.delayMs > 0) {
        throw new ConfigurationError(
          `Kafka cannot delay a message (delayMs ${message.delayMs} for ${message.id}); publish it without delayMs`,
        );
      }
      let group = byTopic.get(message.destination);
      if (group === undefined) {
        group = { topic: message.destination, messages: [] };
        byTopic.set(message.destination, group);
      }
      group.messages.push({
        key: message.key ?? null,
        value:
          typeof message.body === 'string'
            ? message.body
            : Buffer.from(message.body.buffer, message.body.byteOffset, message.body.byteLength),
        headers: { ...injectTraceHeaders(message.headers), [HEADERS.messageId]: message.id },
        ...(message.timestamp !== undefined ? { timestamp: String(message.timestamp.getTime()) } : {}),
      });
    }
    const producer = await this.#connected();
    try {
      await sendConfirmed(producer, [...byTopic.values()], this.#timeoutMs);
    } catch (error) {
      this.#retire(producer);
      throw error;
    }
  }

  // An idempotent producer that failed a send may be stuck for good: after a broker restart kafkajs can keep
  // answering "out of order sequence number" for its producer id on every later send (seen in the torture's
  // pipeline: a relay that never recovered). A producer this publisher created is therefore dropped after any
  // failed send, and the next publish connects a fresh one (a new producer id). The records are not lost: the
  // caller (relay, replay) did not settle its source and sends them again; the consumer's inbox dedupes.
  // A producer the application passed in is its own to replace.
  #retire(producer: KafkaProducerLike): void {
    // Only the current one: a send of an older producer may fail after a fresh one took its place.
    if (this.#kafka === undefined || this.#created !== producer) return;
    this.#connecting = undefined;
    this.#created = undefined;
    void producer.disconnect().catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#kafka !== undefined && this.#connecting !== undefined) {
      const producer = await this.#connecting.catch(() => undefined);
      await producer?.disconnect();
    }
  }

  async #connected(): Promise<KafkaProducerLike> {
    if (this.#producer !== undefined) return this.#producer;
    const kafka = this.#kafka!;
    this.#connecting ??= (async () => {
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      this.#created = producer;
      return producer;
    })();
    try {
      return await this.#connecting;
    } catch (error) {
      this.#connecting = undefined;
      throw new PublishError('could not connect the Kafka producer', { cause: error });
    }
  }
}
