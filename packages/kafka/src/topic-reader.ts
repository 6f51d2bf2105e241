// Reads a topic from a consumer group's position up to the end it had when reading started, as a pull-based
// async iterable: what the DLQ reader's `browse` and `take` are built on. Nothing is committed unless the
// caller calls `commit`.

import type {
  KafkaAdminLike,
  KafkaClientLike,
  KafkaConsumerLike,
  KafkaEachBatchPayload,
  KafkaMessageLike,
} from './kafka-client-types.js';

/** Consumer settings for the short-lived reading consumer (tests shorten the group timings). */
export interface ReaderConsumerConfig {
  readonly sessionTimeout?: number;
  readonly heartbeatInterval?: number;
  readonly rebalanceTimeout?: number;
  readonly maxWaitTimeInMs?: number;
}

/** One record read. */
export interface ReadRecord {
  readonly partition: number;
  readonly message: KafkaMessageLike;
}

/** Options of one read. */
export interface TopicReadOptions {
  readonly kafka: KafkaClientLike;
  readonly topic: string;
  readonly groupId: string;
  readonly limit: number;
  /** The read ends when no record arrived for this long although the end was not reached (compacted tail). */
  readonly idleTimeoutMs: number;
  readonly consumerConfig: ReaderConsumerConfig;
}

/** A read in progress: iterate `records()` once; `commit` while iterating. */
export class TopicRead {
  readonly #options: TopicReadOptions;
  #consumer: KafkaConsumerLike | undefined;
  #running = false;

  constructor(options: TopicReadOptions) {
    this.#options = options;
  }

  /** Commits `offset` (the next offset to read) of `partition` for the group. Only while iterating. */
  async commit(partition: number, offset: string): Promise<void> {
    if (!this.#running || this.#consumer === undefined) {
      throw new Error(
        `the read of ${this.#options.topic} has ended; offset ${offset} of partition ${partition} was not committed`,
      );
    }
    await this.#consumer.commitOffsets([{ topic: this.#options.topic, partition, offset }]);
  }

  /** The records from the group's committed position (or the log start) up to the end seen at the start. */
  async *records(): AsyncGenerator<ReadRecord, void, undefined> {
    const { kafka, topic, groupId, limit, idleTimeoutMs, consumerConfig } = this.#options;
    if (limit <= 0) return;
    const ends = await this.#pendingEnds(kafka.admin());
    if (ends.size === 0) return;

    const queue: ReadRecord[] = [];
    let closing = false;
    let wakeReader: (() => void) | undefined;
    let wakeFetcher: (() => void) | undefined;
    const notifyReader = (): void => {
      wakeReader?.();
      wakeReader = undefined;
    };

    const consumer = kafka.consumer({ groupId, allowAutoTopicCreation: false, ...consumerConfig });
    this.#consumer = consumer;
    const eachBatch = async (payload: KafkaEachBatchPayload): Promise<void> => {
      const { batch } = payload;
      const end = ends.get(batch.partition);
      if (closing || end === undefined) return;
      for (const message of batch.messages)
        if (BigInt(message.offset) < end) queue.push({ partition: batch.partition, message });
      if (BigInt(batch.lastOffset()) >= end - 1n) {
        ends.delete(batch.partition);
        consumer.pause([{ topic, partitions: [batch.partition] }]);
      }
      notifyReader();
      // Hold the fetch until the reader took this batch: one batch buffered at most.
      while (queue.length > 0 && !closing) {
        await new Promise<void>((resolve) => {
          wakeFetcher = resolve;
          setTimeout(resolve, 1_000);
        });
        await payload.heartbeat();
      }
    };

    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({ autoCommit: false, eachBatchAutoResolve: true, eachBatch });
      this.#running = true;
      let yielded = 0;
      while (yielded < limit) {
        const next = queue.shift();
        if (next !== undefined) {
          if (queue.length === 0) wakeFetcher?.();
          yielded += 1;
          yield next;
          continue;
        }
        if (ends.size === 0) break;
        const arrived = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), idleTimeoutMs);
          wakeReader = () => {
            clearTimeout(timer);
            resolve(true);
          };
        });
        if (!arrived && queue.length === 0) break;
      }
    } finally {
      closing = true;
      wakeFetcher?.();
      this.#running = false;
      await consumer.stop().catch(() => undefined);
      await consumer.disconnect().catch(() => undefined);
    }
  }

  /** Per partition with records left to read for the group: the end offset (high watermark) now. */
  async #pendingEnds(admin: KafkaAdminLike): Promise<Map<number, bigint>> {
    const { topic, groupId } = this.#options;
    await admin.connect();
    try {
      const watermarks = await admin.fetchTopicOffsets(topic);
      const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
      const position = new Map<number, bigint>();
      for (const p of committed.find((t) => t.topic === topic)?.partitions ?? [])
        position.set(p.partition, BigInt(p.offset));
      const ends = new Map<number, bigint>();
      for (const w of watermarks) {
        const low = BigInt(w.low);
        const high = BigInt(w.high);
        const at = position.get(w.partition) ?? -1n;
        const start = at < low ? low : at;
        if (start < high) ends.set(w.partition, high);
      }
      return ends;
    } finally {
      await admin.disconnect();
    }
  }
}
