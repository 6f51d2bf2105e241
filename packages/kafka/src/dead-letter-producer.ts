// Writes dead letters of the Kafka consumer: the original key and bytes, the original headers, and core's
// dead-letter headers, produced with acks from all in-sync replicas before the source offset may be committed.
// A record may not exceed the DLQ topic's max.message.bytes: a dead letter the broker refuses as too large is
// produced again in a smaller form (no stack, then no original headers and no error text), so a record whose
// own bytes fit the DLQ topic always reaches it instead of stalling its partition.

import {
  clipText,
  deadLetterHeaders,
  deadLetterRecord,
  deliveryContext,
  HEADERS,
  injectTraceHeaders,
} from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage } from '@inboxkit/core';
import type {
  KafkaClientLike,
  KafkaHeaders,
  KafkaMessageLike,
  KafkaProducerLike,
} from './kafka-client-types.js';
import { ReplaceableProducer } from './replaceable-producer.js';
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
 * How much of a dead letter travels: `full` (original headers, the whole error); `compact` (no stack, the error
 * message clipped to 500 characters); `minimal` (no original headers; the id, consumer, reason, attempts,
 * times, source and the error's name only). Key and value are the original's in every form.
 */
export type KafkaDeadLetterForm = 'full' | 'compact' | 'minimal';

const COMPACT_ERROR_MESSAGE = 500;

/** Core's dead-letter headers cut down to `form`. */
export function deadLetterHeadersFor(
  fresh: Record<string, string>,
  form: KafkaDeadLetterForm,
): Record<string, string> {
  if (form === 'full') return fresh;
  const out = { ...fresh };
  delete out[HEADERS.errorStack];
  if (form === 'minimal') {
    delete out[HEADERS.errorMessage];
    delete out[HEADERS.errorCode];
  } else {
    const errorMessage = out[HEADERS.errorMessage];
    if (errorMessage !== undefined) out[HEADERS.errorMessage] = clipText(errorMessage, COMPACT_ERROR_MESSAGE);
  }
  return out;
}

/** True when the broker refused a produce because a record (or batch) exceeds the topic's size limit. */
export function isRecordTooLarge(error: unknown): boolean {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0 && seen.size < 16) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null || seen.has(e)) continue;
    seen.add(e);
    const { type, cause, originalError, errors } = e as {
      type?: unknown;
      cause?: unknown;
      originalError?: unknown;
      errors?: unknown;
    };
    if (type === 'MESSAGE_TOO_LARGE' || type === 'RECORD_LIST_TOO_LARGE') return true;
    queue.push(cause, originalError, ...(Array.isArray(errors) ? (errors as unknown[]) : []));
  }
  return false;
}

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

/**
 * Produces dead letters; owns (connects, disconnects) the producer only when it created it from `kafka`. A
 * producer it created is replaced by a fresh one after any failed send, as `kafkaPublisher`'s is (see
 * `ReplaceableProducer`): a partition whose dead letter cannot be produced would otherwise stall behind it.
 */
export class DeadLetterProducer {
  readonly #consumerName: string;
  readonly #topicFor: (topic: string) => string;
  readonly #timeoutMs: number;
  readonly #producer: ReplaceableProducer;
  /** Between `start()` and `stop()`; from the start for an application's producer. */
  #started: boolean;

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
    this.#producer = new ReplaceableProducer(options.producer, options.kafka);
    this.#started = options.producer !== undefined;
  }

  /** Connects the producer this object creates (an application's producer is expected connected). */
  async start(): Promise<void> {
    this.#started = true;
    await this.#producer.current();
  }

  /** Disconnects the producer this object created. */
  async stop(): Promise<void> {
    this.#started = false;
    await this.#producer.close();
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
    if (!this.#started) throw new Error('the dead-letter producer is not started');
    const target = this.#topicFor(topic);
    await this.#producer.send(async (producer) => {
      try {
        await sendConfirmed(
          producer,
          [{ topic: target, messages: deadLetters.map((d) => this.#record(d, now, 'full')) }],
          this.#timeoutMs,
        );
      } catch (error) {
        if (!isRecordTooLarge(error)) throw error;
        // Some record is over the DLQ topic's max.message.bytes: one at a time, each in the largest form that
        // fits.
        for (const deadLetter of deadLetters) await this.#sendFitting(producer, target, deadLetter, now);
      }
    });
  }

  /** One dead letter, full, then compact, then minimal, until the broker takes it. Rejects when none fits. */
  async #sendFitting(
    producer: KafkaProducerLike,
    topic: string,
    deadLetter: DeadLetter,
    now: Date,
  ): Promise<void> {
    let lastError: unknown;
    for (const form of ['full', 'compact', 'minimal'] as const) {
      try {
        await sendConfirmed(
          producer,
          [{ topic, messages: [this.#record(deadLetter, now, form)] }],
          this.#timeoutMs,
        );
        return;
      } catch (error) {
        if (!isRecordTooLarge(error)) throw error;
        lastError = error;
      }
    }
    throw lastError;
  }

  #record(
    { record, message, outcome }: DeadLetter,
    now: Date,
    form: KafkaDeadLetterForm,
  ): TopicRecords['messages'][number] {
    const facts = deadLetterHeadersFor(
      deadLetterHeaders(deadLetterRecord(this.#consumerName, message, outcome, now)),
      form,
    );
    // The copy continues the delivery's trace (its `traceparent` replaces the original's), except in the
    // minimal form, which keeps only what the DLQ cannot do without.
    const fresh = form === 'minimal' ? facts : injectTraceHeaders(facts, deliveryContext(message));
    return {
      key: record.key,
      value: record.value,
      headers: form === 'minimal' ? fresh : deadLetterRecordHeaders(record.headers, fresh),
    };
  }
}
