// The producer kafkaPublisher and the consumer's dead-letter producer send with. An idempotent kafkajs producer
// that failed a send may be stuck for good: after a broker restart it can keep answering "out of order sequence
// number" for its producer id on every later send (seen in the torture's pipeline: an outbox relay that never
// recovered). A producer created here is therefore dropped after any failed send, and the next send connects a
// fresh one (a new producer id). Nothing is lost by the swap: the caller did not settle its source (relay row,
// replayed entry, source offset) and sends again; the consumer's inbox dedupes. A producer the application
// passed in is its own to replace, and is never disconnected here.

import type { KafkaClientLike, KafkaProducerLike } from './kafka-client-types.js';

export class ReplaceableProducer {
  readonly #given: KafkaProducerLike | undefined;
  readonly #kafka: KafkaClientLike | undefined;
  #connecting: Promise<KafkaProducerLike> | undefined;
  /** The producer `#connecting` resolved to, once it did. */
  #created: KafkaProducerLike | undefined;
  readonly #connectError: (cause: unknown) => unknown;

  /**
   * Sends with `producer` when given, else with producers created from `kafka`. A failed connect rejects
   * with `connectError(cause)` (default: the cause itself).
   */
  constructor(
    producer: KafkaProducerLike | undefined,
    kafka: KafkaClientLike | undefined,
    connectError: (cause: unknown) => unknown = (cause) => cause,
  ) {
    this.#given = producer;
    this.#kafka = producer === undefined ? kafka : undefined;
    this.#connectError = connectError;
  }

  /** The producer to send with: the application's, or a connected one of ours (connecting it if none is). */
  async current(): Promise<KafkaProducerLike> {
    if (this.#given !== undefined) return this.#given;
    const kafka = this.#kafka;
    if (kafka === undefined) throw new Error('no Kafka producer and no client to create one from');
    const connecting = (this.#connecting ??= ReplaceableProducer.#connect(kafka));
    try {
      const producer = await connecting;
      // Unless close() or a failed send let go of this connect meanwhile.
      if (this.#connecting === connecting) this.#created = producer;
      return producer;
    } catch (error) {
      if (this.#connecting === connecting) this.#connecting = undefined;
      throw this.#connectError(error);
    }
  }

  static async #connect(kafka: KafkaClientLike): Promise<KafkaProducerLike> {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    return producer;
  }

  /** Runs `send` with the current producer; when it rejects, a producer of ours is dropped (see above). */
  async send(send: (producer: KafkaProducerLike) => Promise<void>): Promise<void> {
    const producer = await this.current();
    try {
      await send(producer);
    } catch (error) {
      // Only the current one: a send of an older producer may fail after a fresh one took its place.
      if (producer === this.#created) {
        this.#connecting = undefined;
        this.#created = undefined;
        void producer.disconnect().catch(() => undefined);
      }
      throw error;
    }
  }

  /**
   * Disconnects the producer of ours, if one is connected or connecting (never the application's); a later
   * send connects a new one.
   */
  async close(): Promise<void> {
    const connecting = this.#connecting;
    this.#connecting = undefined;
    this.#created = undefined;
    const producer = await connecting?.catch(() => undefined);
    await producer?.disconnect();
  }
}
