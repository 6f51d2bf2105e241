// A @platformatic/kafka Consumer behind the kafkajs-shaped KafkaConsumerLike: `run({ eachBatch })` over a
// MessagesStream, with per-partition batches, pause/resume, seek and manual commits.
//
// @platformatic/kafka has one stream for all assigned partitions and no seek or per-partition pause, so the
// adapter keeps, per partition, the records fetched but not yet handed out (`queue`) and those handed out but
// not yet resolved (`held`). A seek back replays from those (the transport only seeks back to a record it
// has not resolved); a pause just stops handing out the partition's records. Like kafkajs, the records of a
// batch left unresolved when eachBatch returns (without a seek) are handed out again. Every group join
// restarts the stream from the committed offsets and drops what was held, and batches of an older join are
// stale: their commits are refused with REBALANCE_IN_PROGRESS rather than written over the new owner's.

import { EventEmitter } from 'node:events';

import type {
  KafkaCrashEvent,
  KafkaConsumerLike,
  KafkaEachBatchPayload,
  KafkaGroupJoinEvent,
  KafkaHeaders,
  KafkaMessageLike,
  KafkaRunConfig,
  KafkaTopicOffsets,
  KafkaTopicPartitions,
} from '../kafka-client-types.js';
import type {
  PlatformaticConsumer,
  PlatformaticMessage,
  PlatformaticMessagesStream,
} from './platformatic-types.js';
import { kafkajsShaped } from './platformatic-errors.js';

/** Options of the adapter's consumer beyond what the Consumer was created with. */
export interface PlatformaticConsumerAdapterOptions {
  /** Most records handed to one eachBatch call. Default 500. */
  readonly maxBatchSize?: number;
  /** Most records fetched and not yet handed out, over all partitions, before the stream is read no more. Default 5,000. */
  readonly maxBufferedRecords?: number;
  /** Delay before a failed stream is consumed again. Default 1,000 ms. */
  readonly restartDelayMs?: number;
}

interface Held {
  readonly message: KafkaMessageLike;
  readonly offset: bigint;
  readonly leaderEpoch: number;
}

interface PartitionState {
  readonly topic: string;
  readonly partition: number;
  queue: Held[];
  held: Held[];
  paused: boolean;
  busy: boolean;
  /** Set by a seek during the batch in flight: its unresolved records are not handed out again. */
  seeked: boolean;
  /** Records below this offset are dropped when they arrive (a seek forward). */
  floor: bigint;
}

class StaleBatchError extends Error {
  readonly type = 'REBALANCE_IN_PROGRESS';
  constructor(what: string) {
    super(`${what}: the group rebalanced since this batch was fetched`);
    this.name = 'StaleBatchError';
  }
}

/**
 * Wraps a @platformatic/kafka `Consumer` (created with `autocommit: false`) as the consumer `kafkaConsumer()`
 * and the dead-letter reader run. `platformaticKafka().consumer()` calls it; call it yourself to pass a
 * Consumer you configured.
 *
 * @example
 * import { Consumer } from '@platformatic/kafka';
 * const consumer = platformaticConsumer(
 *   new Consumer({ clientId: 'payments', bootstrapBrokers: ['localhost:9092'], groupId: 'payments', autocommit: false }),
 * );
 */
export function platformaticConsumer(
  consumer: PlatformaticConsumer,
  options: PlatformaticConsumerAdapterOptions = {},
): KafkaConsumerLike {
  return new PlatformaticConsumerAdapter(consumer, options);
}

class PlatformaticConsumerAdapter implements KafkaConsumerLike {
  readonly #consumer: PlatformaticConsumer;
  readonly #maxBatchSize: number;
  readonly #maxBuffered: number;
  readonly #restartDelayMs: number;
  readonly #events = new EventEmitter();
  readonly #partitions = new Map<string, PartitionState>();
  #topics: string[] = [];
  #fromBeginning = false;
  #config: KafkaRunConfig | undefined;
  #running = false;
  #stream: PlatformaticMessagesStream | undefined;
  /** Bumped by every join and rebalance: batches and stream reads of an older value are stale. */
  #generation = 0;
  #joins = 0;
  #buffered = 0;
  #active = 0;
  readonly #inFlight = new Set<Promise<void>>();
  #wakeReader: (() => void) | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #pumpSoon: NodeJS.Immediate | undefined;
  readonly #listeners: [string, (payload: never) => void][] = [];

  constructor(consumer: PlatformaticConsumer, options: PlatformaticConsumerAdapterOptions) {
    this.#consumer = consumer;
    this.#maxBatchSize = options.maxBatchSize ?? 500;
    this.#maxBuffered = options.maxBufferedRecords ?? 5_000;
    this.#restartDelayMs = options.restartDelayMs ?? 1_000;
    this.#events.setMaxListeners(0);
  }

  /** @platformatic/kafka connects on first use. */
  async connect(): Promise<void> {}

  async disconnect(): Promise<void> {
    await this.stop();
    await this.#consumer.close(true);
  }

  async subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void> {
    this.#topics = [...new Set([...this.#topics, ...subscription.topics])];
    this.#fromBeginning = subscription.fromBeginning ?? false;
  }

  async run(config: KafkaRunConfig = {}): Promise<void> {
    if (this.#running) throw new Error('platformaticConsumer: run() was already called; stop() it first');
    if (config.autoCommit !== false || config.eachBatch === undefined) {
      throw new TypeError('platformaticConsumer: run() supports only { autoCommit: false, eachBatch }');
    }
    this.#config = config;
    this.#running = true;
    this.#attach();
    try {
      await this.#consume();
    } catch (error) {
      this.#running = false;
      this.#detach();
      throw error;
    }
  }

  #attach(): void {
    const on = (event: string, listener: (payload: never) => void): void => {
      this.#consumer.on(event, listener);
      this.#listeners.push([event, listener]);
    };
    const rebalancing = (): void => {
      // Batches in flight are stale from now: their commits are refused, nothing more is handed out.
      this.#generation++;
    };
    // Emitted when a heartbeat (or a join) hears REBALANCE_IN_PROGRESS; a join follows. (`consumer:rejoin`
    // comes after that join, so it is not a rebalance signal.)
    on('consumer:group:rebalance', rebalancing);
    on('consumer:group:join', (payload: { assignments?: { topic: string; partitions: number[] }[] | null }) =>
      this.#joined(payload.assignments ?? []),
    );
  }

  #detach(): void {
    for (const [event, listener] of this.#listeners.splice(0)) this.#consumer.removeListener(event, listener);
  }

  #joined(assignments: readonly { topic: string; partitions: number[] }[]): void {
    this.#generation++;
    this.#joins++;
    this.#dropHeld();
    const memberAssignment: Record<string, number[]> = {};
    for (const a of assignments) memberAssignment[a.topic] = [...a.partitions];
    // The first join happens inside consume(); later ones restart the stream from the committed offsets.
    if (this.#joins > 1 && this.#running) this.#restartStream(0);
    const event: KafkaGroupJoinEvent = { payload: { memberAssignment } };
    this.#events.emit('consumer.group_join', event);
  }

  #dropHeld(): void {
    for (const p of this.#partitions.values()) {
      this.#buffered -= p.queue.length;
      p.queue = [];
      p.held = [];
      p.floor = 0n;
    }
    this.#wakeReader?.();
  }

  async #consume(): Promise<void> {
    const stream = await this.#consumer
      .consume({
        topics: this.#topics,
        mode: 'committed',
        fallbackMode: this.#fromBeginning ? 'earliest' : 'latest',
        autocommit: false,
      })
      .catch((error: unknown) => {
        throw kafkajsShaped(error);
      });
    if (!this.#running) {
      await stream.close().catch(() => undefined);
      return;
    }
    this.#stream = stream;
    stream.on('error', (error) => this.#streamFailed(stream, error));
    void this.#read(stream);
  }

  async #read(stream: PlatformaticMessagesStream): Promise<void> {
    try {
      for await (const item of stream) {
        if (this.#stream !== stream || !this.#running) return;
        this.#enqueue(item as PlatformaticMessage);
        this.#schedulePump();
        while (this.#buffered >= this.#maxBuffered && this.#stream === stream && this.#running) {
          await new Promise<void>((resolve) => (this.#wakeReader = resolve));
          this.#wakeReader = undefined;
        }
      }
    } catch (error) {
      this.#streamFailed(stream, error as Error);
    }
  }

  #streamFailed(stream: PlatformaticMessagesStream, error: Error): void {
    if (this.#stream !== stream || !this.#running) return;
    const event: KafkaCrashEvent = { payload: { error, restart: true } };
    this.#events.emit('consumer.crash', event);
    this.#restartStream(this.#restartDelayMs);
  }

  /** Closes the stream and consumes again from the committed offsets (after `delayMs`). */
  #restartStream(delayMs: number): void {
    const old = this.#stream;
    this.#stream = undefined;
    this.#dropHeld();
    void old?.close().catch(() => undefined);
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => {
      if (!this.#running || this.#stream !== undefined) return;
      this.#consume().catch((error: unknown) => {
        if (!this.#running) return;
        this.#events.emit('consumer.crash', { payload: { error, restart: true } });
        this.#restartStream(this.#restartDelayMs);
      });
    }, delayMs);
  }

  #state(topic: string, partition: number): PartitionState {
    const key = `${topic}\u0000${partition}`;
    let p = this.#partitions.get(key);
    if (p === undefined) {
      p = { topic, partition, queue: [], held: [], paused: false, busy: false, seeked: false, floor: 0n };
      this.#partitions.set(key, p);
    }
    return p;
  }

  #enqueue(m: PlatformaticMessage): void {
    const p = this.#state(m.topic, m.partition);
    if (m.offset < p.floor) return;
    const last = p.queue.at(-1) ?? p.held.at(-1);
    // A fetch may overlap what is held (after a replay): keep one copy of each offset, in order.
    if (last !== undefined && m.offset <= last.offset) return;
    p.queue.push({ message: toKafkaMessage(m), offset: m.offset, leaderEpoch: m.leaderEpoch });
    this.#buffered++;
  }

  /**
   * Pumps once the stream has handed over what it holds now: the records of one fetch arrive one by one, and
   * pumping at the first would hand it out alone, its fetch-mates in later batches (kafkajs hands a partition's
   * fetch to one eachBatch).
   */
  #schedulePump(): void {
    this.#pumpSoon ??= setImmediate(() => {
      this.#pumpSoon = undefined;
      this.#pump();
    });
  }

  /** Hands out a batch to every partition that can take one, up to partitionsConsumedConcurrently. */
  #pump(): void {
    const config = this.#config;
    if (!this.#running || config?.eachBatch === undefined) return;
    const concurrency = config.partitionsConsumedConcurrently ?? 1;
    for (const p of this.#partitions.values()) {
      if (this.#active >= concurrency) return;
      if (p.paused || p.busy || p.queue.length === 0) continue;
      const batch = p.queue.splice(0, this.#maxBatchSize);
      this.#buffered -= batch.length;
      this.#wakeReader?.();
      p.held.push(...batch);
      p.busy = true;
      p.seeked = false;
      this.#active++;
      const run = this.#runBatch(p, batch, config.eachBatch).finally(() => {
        this.#inFlight.delete(run);
        this.#active--;
        p.busy = false;
        this.#pump();
      });
      this.#inFlight.add(run);
    }
  }

  async #runBatch(
    p: PartitionState,
    batch: readonly Held[],
    eachBatch: NonNullable<KafkaRunConfig['eachBatch']>,
  ): Promise<void> {
    const generation = this.#generation;
    const stale = (): boolean => generation !== this.#generation;
    const payload: KafkaEachBatchPayload = {
      batch: {
        topic: p.topic,
        partition: p.partition,
        // Not the partition's high watermark (the stream does not expose it): one past the batch. Nothing in
        // this package reads it.
        highWatermark: String(batch.at(-1)!.offset + 1n),
        messages: batch.map((h) => h.message),
        lastOffset: () => batch.at(-1)!.message.offset,
      },
      resolveOffset: (offset) => {
        if (stale()) return;
        const resolved = BigInt(offset);
        p.held = p.held.filter((h) => h.offset > resolved);
      },
      // @platformatic/kafka heartbeats on its own timer, whatever the handlers do; a rebalance shows here.
      heartbeat: async () => {
        if (stale()) throw new StaleBatchError('heartbeat');
      },
      commitOffsetsIfNecessary: async (offsets?: { topics: KafkaTopicOffsets[] }) => {
        if (offsets === undefined) return;
        if (stale()) throw new StaleBatchError('commit');
        await this.#commit(offsets.topics, batch);
      },
      isRunning: () => this.#running,
      isStale: stale,
    };
    try {
      await eachBatch(payload);
      if (this.#config?.eachBatchAutoResolve !== false && !p.seeked)
        payload.resolveOffset(payload.batch.lastOffset());
    } catch (error) {
      if (!stale() && this.#running) {
        this.#events.emit('consumer.crash', {
          payload: { error: error as Error, restart: true },
        });
      }
    }
    if (stale()) return;
    // Like kafkajs: what was not resolved (and not seeked) is handed out again.
    if (!p.seeked && p.held.length > 0) {
      this.#buffered += p.held.length;
      p.queue = [...p.held, ...p.queue];
      p.held = [];
    }
  }

  async #commit(topics: readonly KafkaTopicOffsets[], batch: readonly Held[]): Promise<void> {
    const epoch = batch.at(-1)?.leaderEpoch ?? -1;
    const offsets = topics.flatMap((t) =>
      t.partitions.map((q) => ({
        topic: t.topic,
        partition: q.partition,
        offset: BigInt(q.offset),
        leaderEpoch: epoch,
      })),
    );
    if (offsets.length > 0) {
      await this.#consumer.commit({ offsets }).catch((error: unknown) => {
        throw kafkajsShaped(error);
      });
    }
  }

  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    clearTimeout(this.#restartTimer);
    clearImmediate(this.#pumpSoon);
    this.#pumpSoon = undefined;
    this.#wakeReader?.();
    // Like kafkajs: the batches in flight end (isRunning() is false now) before the group is left.
    await Promise.allSettled([...this.#inFlight]);
    const stream = this.#stream;
    this.#stream = undefined;
    await stream?.close().catch(() => undefined);
    this.#detach();
    this.#dropHeld();
    this.#joins = 0;
    await this.#consumer.leaveGroup(true).catch(() => undefined);
  }

  async commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void> {
    await this.#consumer.commit({
      offsets: offsets.map((o) => ({
        topic: o.topic,
        partition: o.partition,
        offset: BigInt(o.offset),
        leaderEpoch: -1,
      })),
    });
  }

  seek(position: { topic: string; partition: number; offset: string }): void {
    const p = this.#state(position.topic, position.partition);
    const target = BigInt(position.offset);
    const all = [...p.held, ...p.queue];
    const first = all[0];
    if (target < (first?.offset ?? target) && first !== undefined) {
      throw new RangeError(
        `platformaticConsumer: cannot seek ${position.topic}[${position.partition}] back to ${position.offset}: ` +
          `the adapter holds the records from offset ${first.offset} only`,
      );
    }
    const kept = all.filter((h) => h.offset >= target);
    this.#buffered += kept.length - p.queue.length;
    p.queue = kept;
    p.held = [];
    p.seeked = true;
    p.floor = target;
    this.#pump();
  }

  pause(topics: KafkaTopicPartitions[]): void {
    for (const p of this.#matching(topics)) p.paused = true;
  }

  resume(topics: KafkaTopicPartitions[]): void {
    for (const p of this.#matching(topics)) p.paused = false;
    this.#pump();
  }

  #matching(topics: KafkaTopicPartitions[]): PartitionState[] {
    return topics.flatMap((t) =>
      (
        t.partitions ??
        [...this.#partitions.values()].filter((p) => p.topic === t.topic).map((p) => p.partition)
      ).map((partition) => this.#state(t.topic, partition)),
    );
  }

  on(eventName: 'consumer.group_join', listener: (event: KafkaGroupJoinEvent) => void): () => void;
  on(eventName: 'consumer.crash', listener: (event: KafkaCrashEvent) => void): () => void;
  on(eventName: string, listener: (event: never) => void): () => void {
    const l = listener as (event: unknown) => void;
    this.#events.on(eventName, l);
    return () => this.#events.removeListener(eventName, l);
  }
}

function toKafkaMessage(m: PlatformaticMessage): KafkaMessageLike {
  const headers: KafkaHeaders = {};
  for (const [name, value] of m.headerEntries ?? m.headers) {
    const key = name.toString();
    const previous = headers[key];
    if (previous === undefined) headers[key] = value;
    else headers[key] = [...(Array.isArray(previous) ? previous : [previous]), value];
  }
  return {
    key: m.key ?? null,
    value: m.value ?? null,
    timestamp: m.timestamp.toString(),
    offset: m.offset.toString(),
    headers,
  };
}
