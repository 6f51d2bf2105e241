// Writes dead letters of the Kafka consumer: the original key and bytes, the original headers, and core's
// dead-letter headers, produced with acks from all in-sync replicas before the source offset may be committed.
// A record may not exceed the DLQ topic's max.message.bytes: `send` produces one form of core's
// `deadLetterForms` and says `too-large` when the broker refuses it, and the delivery kit's `settle()` moves to
// the next smaller form, so a record whose own bytes fit the DLQ topic always reaches it instead of stalling
// its partition.

import { deadLetterForms, deadLetterRecord, deliveryContext, injectTraceHeaders } from '@inboxkit/core';
import type {
  DeadLetterForm,
  DeadLetterFormSpec,
  DeadLetterOutcome,
  FormAttempt,
  InboundMessage,
} from '@inboxkit/core';
import type {
  KafkaClientLike,
  KafkaHeaders,
  KafkaMessageLike,
  KafkaProducerLike,
} from './kafka-client-types.js';
import { ReplaceableProducer } from './replaceable-producer.js';
import { sendConfirmed } from './send-confirmed.js';
import type { TopicRecords } from './send-confirmed.js';

/** A record to dead-letter, and its message. */
export interface DeadLetter {
  readonly record: KafkaMessageLike;
  readonly message: InboundMessage;
}

/** A dead letter waiting for the next flush, and the caller to tell. */
interface PendingDeadLetter {
  readonly topic: string;
  readonly record: TopicRecords['messages'][number];
  readonly resolve: (attempt: FormAttempt) => void;
}

const INBOXKIT_PREFIX = 'x-inboxkit-';

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
  /** Dead letters asked for in this tick, produced together by the next flush. */
  #pending: PendingDeadLetter[] = [];

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

  /**
   * Produces `deadLetter`'s dead letter for `outcome` in `form` (core's `deadLetterForms`) with `acks: -1`, for
   * the delivery kit's `settle()`: `too-large` when the broker refused the record as over the DLQ topic's
   * `max.message.bytes` (the next smaller form is tried), `failed` for anything else (the source offset is not
   * committed and the record comes back). Never rejects.
   *
   * Calls made in the same tick (a batch-mode chunk settles its records together) are coalesced into one
   * confirmed produce: one request for all of them instead of one round trip each. When the broker refuses that
   * produce as too large, each record is produced again alone, so every caller still learns whether its own
   * form fits; a produce that fails otherwise fails every call it carried, and only those.
   */
  async send(
    topic: string,
    deadLetter: DeadLetter,
    form: DeadLetterForm,
    outcome: DeadLetterOutcome,
    now: Date = new Date(),
  ): Promise<FormAttempt> {
    if (!this.#started)
      return { status: 'failed', error: new Error('the dead-letter producer is not started') };
    const record = deadLetterRecord(this.#consumerName, deadLetter.message, outcome, now);
    const spec = deadLetterForms(record).find((f) => f.form === form)!;
    const pending = { topic: this.#topicFor(topic), record: this.#record(deadLetter, spec) };
    return new Promise((resolve) => {
      this.#pending.push({ ...pending, resolve });
      // The first of this tick schedules the flush; the others of the tick join it.
      if (this.#pending.length === 1) setImmediate(() => void this.#flush());
    });
  }

  /** Produces what was asked since the last flush: together, or alone when there is one (or together is too large). */
  async #flush(): Promise<void> {
    const pending = this.#pending.splice(0);
    if (pending.length === 1) {
      pending[0]!.resolve(await this.#produce(pending));
      return;
    }
    const together = await this.#produce(pending);
    if (together.status !== 'too-large') {
      for (const p of pending) p.resolve(together);
      return;
    }
    // Some record (or the request) is over the limit: each alone, in order, so each caller learns its own fate.
    for (const p of pending) p.resolve(await this.#produce([p]));
  }

  /** One confirmed produce of `pending`'s records, grouped by DLQ topic in their order. Never rejects. */
  async #produce(pending: readonly PendingDeadLetter[]): Promise<FormAttempt> {
    const byTopic = new Map<string, TopicRecords>();
    for (const { topic, record } of pending) {
      let group = byTopic.get(topic);
      if (group === undefined) byTopic.set(topic, (group = { topic, messages: [] }));
      group.messages.push(record);
    }
    let tooLarge: unknown;
    try {
      await this.#producer.send(async (producer) => {
        try {
          await sendConfirmed(producer, [...byTopic.values()], this.#timeoutMs);
        } catch (error) {
          // Refused as too large: no fault of the producer, which stays (any other failure replaces one of ours).
          if (!isRecordTooLarge(error)) throw error;
          tooLarge = error;
        }
      });
    } catch (error) {
      return { status: 'failed', error };
    }
    return tooLarge === undefined ? { status: 'sent' } : { status: 'too-large', error: tooLarge };
  }

  #record(deadLetter: DeadLetter, spec: DeadLetterFormSpec): TopicRecords['messages'][number] {
    const { record, message } = deadLetter;
    // The copy continues the delivery's trace (its `traceparent` replaces the original's), except in the
    // minimal form, which keeps only what the DLQ cannot do without.
    const fresh = spec.trace
      ? injectTraceHeaders(spec.headers, deliveryContext(message))
      : { ...spec.headers };
    return {
      key: record.key,
      value: record.value,
      headers: spec.originalHeaders ? deadLetterRecordHeaders(record.headers, fresh) : fresh,
    };
  }
}
