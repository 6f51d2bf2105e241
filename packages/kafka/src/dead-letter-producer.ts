// Writes dead letters of the Kafka consumer: the original key and bytes, the original headers, and core's
// dead-letter headers, produced with acks from all in-sync replicas before the source offset may be committed.

import { deadLetterHeaders, deadLetterRecord } from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage } from '@inboxkit/core';
import type {
  KafkaClientLike,
  KafkaHeaders,
  KafkaMessageLike,
  KafkaProducerLike,
} from './kafka-client-types.js';
import { sendConfirmed } from './send-confirmed.js';
import type { TopicRecords } from './send-confirmed.js';

/** One record to dead-letter. */
export interface DeadLetter {
  readonly record: KafkaMessageLike;
  readonly message: InboundMessage;
  readonly outcome: DeadLetterOutcome;
}

const INBOXKIT_PREFIX = 'x-inboxkit-';

/**
 * The dead-letter copy's headers: the original ones (as bytes, untouched) without any earlier inboxkit
 * headers — a copy dead-lettered again after a replay must not keep the old error or replay marker — then the
 * fresh dead-letter headers, whose `message-id` is the original id.
 */
export function deadLetterRecordHeaders(
  original: KafkaHeaders | undefined,
  fresh: Record<string, string>,
): KafkaHeaders {
  const headers: KafkaHeaders = {};
  for (const [name, value] of Object.entries(original ?? {})) {
    const lower = name.toLowerCase();
    if (lower.startsWith(INBOXKIT_PREFIX) || Object.hasOwn(fresh, lower)) continue;
    headers[name] = value;
  }
  return Object.assign(headers, fresh);
}

/** Produces dead letters; owns (connects, disconnects) the producer only when it created it from `kafka`. */
export class DeadLetterProducer {
  readonly #consumerName: string;
  readonly #topicFor: (topic: string) => string;
  readonly #timeoutMs: number;
  readonly #kafka: KafkaClientLike | undefined;
  #producer: KafkaProducerLike | undefined;

  constructor(options: {
    readonly consumerName: string;
    readonly topicFor: (topic: string) => string;
    readonly timeoutMs: number;
    readonly producer: KafkaProducerLike | undefined;
    readonly kafka: KafkaClientLike | undefined;
  }) {
    this.#consumerName = options.consumerName;
    this.#topicFor = options.topicFor;
    this.#timeoutMs = options.timeoutMs;
    this.#producer = options.producer;
    this.#kafka = options.producer === undefined ? options.kafka : undefined;
  }

  /** Connects the producer this object creates (an application's producer is expected connected). */
  async start(): Promise<void> {
    if (this.#kafka === undefined || this.#producer !== undefined) return;
    const producer = this.#kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    this.#producer = producer;
  }

  /** Disconnects the producer this object created. */
  async stop(): Promise<void> {
    if (this.#kafka === undefined || this.#producer === undefined) return;
    const producer = this.#producer;
    this.#producer = undefined;
    await producer.disconnect();
  }

  /** The dead-letter topic of a source topic. */
  topicFor(topic: string): string {
    return this.#topicFor(topic);
  }

  /**
   * Produces every dead letter with `acks: -1`, in order, and resolves once all are confirmed. Rejects with a
   * `PublishError` otherwise: the caller must then not commit their offsets.
   */
  async send(topic: string, deadLetters: readonly DeadLetter[], now: Date = new Date()): Promise<void> {
    if (deadLetters.length === 0) return;
    const producer = this.#producer;
    if (producer === undefined) throw new Error('the dead-letter producer is not started');
    const batch: TopicRecords = { topic: this.#topicFor(topic), messages: [] };
    for (const { record, message, outcome } of deadLetters) {
      const fresh = deadLetterHeaders(deadLetterRecord(this.#consumerName, message, outcome, now));
      batch.messages.push({
        key: record.key,
        value: record.value,
        headers: deadLetterRecordHeaders(record.headers, fresh),
      });
    }
    await sendConfirmed(producer, [batch], this.#timeoutMs);
  }
}
