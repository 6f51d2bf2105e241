// kafkaDeadLetterQueue(): read access to a Kafka dead-letter topic for the CLI's `dlq list` and `dlq replay`.
// Reading a topic consumes nothing, so browsing is non-destructive; "removing" a dead letter means committing
// the replay group's offset past it.

import { ConfigurationError, deadLetterEntry, takenDeadLetter } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader, TakenDeadLetter } from '@inboxkit/core';
import { randomUUID } from 'node:crypto';
import { positiveInteger } from './config-checks.js';
import type { KafkaClientLike } from './kafka-client-types.js';
import { decodeHeaders } from './to-inbound-message.js';
import { TopicRead } from './topic-reader.js';
import type { ReadRecord, ReaderConsumerConfig } from './topic-reader.js';

/** A dead letter read from Kafka: core's entry plus the record key (UTF-8), to replay to the same partition. */
export interface KafkaDeadLetterEntry extends DeadLetterEntry {
  readonly key: string | undefined;
}

/** A dead letter taken for replay from Kafka. */
export interface KafkaTakenDeadLetter extends TakenDeadLetter {
  readonly key: string | undefined;
}

/** A DLQ reader whose entries carry the record key. */
export interface KafkaDeadLetterQueueReader extends DeadLetterQueueReader {
  browse(options: { readonly limit: number }): AsyncIterable<KafkaDeadLetterEntry>;
  take(options: { readonly limit: number }): AsyncIterable<KafkaTakenDeadLetter>;
}

/** Options of `kafkaDeadLetterQueue()`. */
export interface KafkaDeadLetterQueueOptions {
  /** The kafkajs client; the reader creates (and disconnects) its own short-lived consumers and admin. */
  readonly kafka: KafkaClientLike;
  /** The dead-letter topic, e.g. `payments.dlq`. */
  readonly topic: string;
  /**
   * The consumer group whose committed offsets mark what `take` removed (replayed). Browsing uses a
   * throwaway group derived from it, deleted afterwards. Default is `` `inboxkit-dlq-replay.${topic}` ``.
   */
  readonly groupId?: string;
  /**
   * A read ends at the topic's end as it was when the read started, or when no record arrived for this long
   * although the end was not reached (a compacted tail, transaction markers). Default is 10,000 ms.
   */
  readonly idleTimeoutMs?: number;
  /** Group timings of the reading consumers (kafkajs consumer options). Default is kafkajs's defaults. */
  readonly consumerConfig?: ReaderConsumerConfig;
}

function toEntry(topic: string, { partition, message }: ReadRecord): KafkaDeadLetterEntry {
  const key = message.key === null ? undefined : message.key.toString('utf8');
  return deadLetterEntry(
    decodeHeaders(message.headers),
    message.value,
    `${topic}:${partition}:${message.offset}`,
    { key },
  );
}

/**
 * Per partition, which taken offsets are settled: the group's offset may only move past a prefix of removed
 * ones, so a released (or unsettled) dead letter stays in the DLQ for the next take.
 */
class RemovalTracker {
  readonly #taken = new Map<number, { offset: bigint; removed: boolean }[]>();

  taken(partition: number, offset: string): void {
    let list = this.#taken.get(partition);
    if (list === undefined) this.#taken.set(partition, (list = []));
    list.push({ offset: BigInt(offset), removed: false });
  }

  /** Marks it removed; returns the offset to commit when the removed prefix grew, else undefined. */
  removed(partition: number, offset: string): string | undefined {
    const list = this.#taken.get(partition) ?? [];
    const n = BigInt(offset);
    const entry = list.find((e) => e.offset === n);
    if (entry === undefined || entry.removed) return undefined;
    entry.removed = true;
    let commit: bigint | undefined;
    while (list.length > 0 && list[0]!.removed) commit = list.shift()!.offset + 1n;
    return commit?.toString();
  }
}

class KafkaDeadLetterQueue implements KafkaDeadLetterQueueReader {
  readonly nonDestructiveBrowse = true;
  readonly #kafka: KafkaClientLike;
  readonly #topic: string;
  readonly #groupId: string;
  readonly #idleTimeoutMs: number;
  readonly #consumerConfig: ReaderConsumerConfig;

  constructor(options: KafkaDeadLetterQueueOptions) {
    if (typeof options.topic !== 'string' || options.topic === '') {
      throw new ConfigurationError('kafkaDeadLetterQueue `topic` must be the dead-letter topic name');
    }
    if (typeof options.kafka?.consumer !== 'function' || typeof options.kafka.admin !== 'function') {
      throw new ConfigurationError(
        'kafkaDeadLetterQueue `kafka` must be a kafkajs client: new Kafka({ brokers })',
      );
    }
    this.#kafka = options.kafka;
    this.#topic = options.topic;
    this.#groupId = options.groupId ?? `inboxkit-dlq-replay.${options.topic}`;
    this.#idleTimeoutMs = positiveInteger(
      'kafkaDeadLetterQueue idleTimeoutMs',
      options.idleTimeoutMs,
      10_000,
    );
    this.#consumerConfig = Object.freeze({ ...options.consumerConfig });
  }

  async *browse(options: { readonly limit: number }): AsyncGenerator<KafkaDeadLetterEntry, void, undefined> {
    const groupId = `${this.#groupId}.browse.${randomUUID()}`;
    const read = this.#read(groupId, options.limit);
    try {
      for await (const record of read.records()) yield toEntry(this.#topic, record);
    } finally {
      // kafkajs commits a starting position for a new group: delete the throwaway group (best effort).
      const admin = this.#kafka.admin();
      try {
        await admin.connect();
        await admin.deleteGroups([groupId]);
      } catch {
        // An empty group the broker expires on its own (offsets.retention.minutes).
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    }
  }

  async *take(options: { readonly limit: number }): AsyncGenerator<KafkaTakenDeadLetter, void, undefined> {
    const read = this.#read(this.#groupId, options.limit);
    const tracker = new RemovalTracker();
    for await (const record of read.records()) {
      const { partition } = record;
      const { offset } = record.message;
      tracker.taken(partition, offset);
      yield takenDeadLetter(toEntry(this.#topic, record), {
        remove: async () => {
          const commit = tracker.removed(partition, offset);
          if (commit !== undefined) await read.commit(partition, commit);
        },
      });
    }
  }

  async close(): Promise<void> {
    // Every read creates and closes its own consumer: nothing stays open between calls.
  }

  #read(groupId: string, limit: number): TopicRead {
    return new TopicRead({
      kafka: this.#kafka,
      topic: this.#topic,
      groupId,
      limit,
      idleTimeoutMs: this.#idleTimeoutMs,
      consumerConfig: this.#consumerConfig,
    });
  }
}

/**
 * A `DeadLetterQueueReader` over a Kafka dead-letter topic. `browse` reads without committing anything
 * (`nonDestructiveBrowse: true`); `take` reads with the replay group and `remove()` commits that group's
 * offset past the entry — only past a prefix of removed entries per partition, so a released entry (and any
 * removed after it in the same partition) is taken again by the next `take`; replaying it twice applies it once.
 * Each read ends at the end the topic had when it started.
 *
 * @example
 * const dlq = kafkaDeadLetterQueue({ kafka, topic: 'payments.dlq' });
 * for await (const entry of dlq.browse({ limit: 20 })) console.log(entry.position, entry.headers['x-inboxkit-reason']);
 */
export function kafkaDeadLetterQueue(options: KafkaDeadLetterQueueOptions): KafkaDeadLetterQueueReader {
  return new KafkaDeadLetterQueue(options);
}
