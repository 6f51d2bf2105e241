// The Kafka implementation of core's Publisher port: produce with acks from all in-sync replicas, the message
// id as the `message-id` header, the key as the partition key. Serves DLQ replay and the outbox relay.

import {
  ConfigurationError,
  HEADERS,
  injectTraceHeaders,
  MessageTooLargeError,
  optionChecks,
  PublishError,
} from '@inboxkit/core';
import { isRecordTooLarge } from './dead-letter-producer.js';
import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import type { KafkaClientLike, KafkaProducerLike } from './kafka-client-types.js';
import { ReplaceableProducer } from './replaceable-producer.js';
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
  readonly #producer: ReplaceableProducer;
  #closed = false;

  constructor(options: KafkaPublisherOptions) {
    if (options.producer === undefined && options.kafka === undefined) {
      throw new ConfigurationError(
        'kafkaPublisher needs `producer` (a connected kafkajs producer) or `kafka` (a kafkajs client)',
      );
    }
    this.#timeoutMs = optionChecks('kafkaPublisher').integer('timeoutMs', options.timeoutMs, 30_000);
    this.#producer = new ReplaceableProducer(
      options.producer,
      options.kafka,
      (cause) => new PublishError('could not connect the Kafka producer', { cause }),
    );
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
    // A producer this publisher created is replaced after a failed send (see ReplaceableProducer).
    await this.#producer.send(async (producer) => {
      try {
        await sendConfirmed(producer, [...byTopic.values()], this.#timeoutMs);
      } catch (error) {
        if (!isRecordTooLarge(error)) throw error;
        // Some record (or the batch) is over its topic's max.message.bytes, refused on every attempt: one record
        // at a time, in order; a record too large alone is named in a non-retriable MessageTooLargeError.
        await this.#sendEach(producer, messages, [...byTopic.values()]);
      }
    });
  }

  async #sendEach(
    producer: KafkaProducerLike,
    messages: readonly OutgoingMessage[],
    groups: readonly TopicRecords[],
  ): Promise<void> {
    const records = groups.flatMap((g) => g.messages.map((record) => ({ topic: g.topic, record })));
    const ids = groups.flatMap((g) => messages.filter((m) => m.destination === g.topic).map((m) => m.id));
    for (const [i, { topic, record }] of records.entries()) {
      try {
        await sendConfirmed(producer, [{ topic, messages: [record] }], this.#timeoutMs);
      } catch (error) {
        if (!isRecordTooLarge(error)) throw error;
        throw new MessageTooLargeError(`message ${ids[i]} is over the max.message.bytes of topic ${topic}`, {
          cause: error,
          messageId: ids[i]!,
        });
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#producer.close();
  }
}
