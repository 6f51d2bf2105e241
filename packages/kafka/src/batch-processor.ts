// Processes one fetched batch of one partition: runs the records in offset order (the careful ones alone,
// charged first), hands each outcome to the delivery kit's `settle()` over Kafka's verbs, and commits the offset
// after the last record that is done — never past one that is not.

import { AttemptCharger, DeliveryGuard, settle } from '@inboxkit/core';
import type {
  BrokerSettlement,
  DeadLetterOutcome,
  GuardedOutcome,
  Outcome,
  SettleOptions,
} from '@inboxkit/core';
import type { AttemptLedger } from './attempt-ledger.js';
import type { DeadLetterProducer } from './dead-letter-producer.js';
import type { KafkaEachBatchPayload, KafkaMessageLike } from './kafka-client-types.js';
import type { ResolvedKafkaConsumerOptions } from './kafka-consumer-options.js';
import { KAFKA_FEATURES, kafkaSettlement } from './kafka-settlement.js';
import type { KafkaDelivery } from './kafka-settlement.js';
import { runKeyConcurrent } from './key-concurrent-run.js';
import type { RetryScheduler } from './retry-scheduler.js';
import { toInboundMessage } from './to-inbound-message.js';
import type { MessageIdResolution } from './to-inbound-message.js';

/** Where one batch stands. */
interface Progress {
  readonly topic: string;
  readonly partition: number;
  readonly payload: KafkaEachBatchPayload;
  /** The offset to commit: one past the last record whose outcome is durable, with all before it. */
  committable: string | undefined;
  /** A redelivery was scheduled: the rest of the batch is left for the next fetch. */
  halted: boolean;
  /** A heartbeat or commit said the group is rebalancing (or the coordinator is gone): rethrown to kafkajs. */
  groupError: unknown;
}

const GROUP_ERRORS = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'NOT_COORDINATOR_FOR_GROUP',
]);

function isGroupError(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    GROUP_ERRORS.has(String((error as { type?: unknown }).type))
  );
}

/**
 * Whether the outcome says the record's handler ran (or its attempts ran out): the record had not finished
 * before. A duplicate had; a store outage, a lock wait or a rejection before the claim says nothing about it.
 */
function ranHandler(outcome: Outcome): boolean {
  switch (outcome.status) {
    case 'processed':
      return true;
    case 'retry':
      return outcome.reason === 'handler-error';
    case 'dead-letter':
      return outcome.reason === 'max-attempts' || outcome.reason === 'permanent-error';
    case 'duplicate':
      return false;
  }
}

/** Whether the outcome is settled as done unless its dead letter fails: processed, duplicate, dead-letter. */
function settlesWithoutHalt(outcome: GuardedOutcome): boolean {
  return outcome.status === 'processed' || outcome.status === 'duplicate' || outcome.status === 'dead-letter';
}

function nextOffset(offset: string): string {
  return (BigInt(offset) + 1n).toString();
}

/** The collaborators a BatchProcessor drives. */
export interface BatchProcessorDeps {
  readonly options: ResolvedKafkaConsumerOptions;
  readonly ledger: AttemptLedger;
  readonly deadLetters: DeadLetterProducer;
  readonly scheduler: RetryScheduler;
  /** True once `stop()` was called: finish the record in hand, commit, return. */
  readonly isStopping: () => boolean;
}

/** The eachBatch handler of the transport. */
export class BatchProcessor {
  readonly #deps: BatchProcessorDeps;
  readonly #options: ResolvedKafkaConsumerOptions;
  readonly #resolution: MessageIdResolution;
  readonly #guard: DeliveryGuard;
  readonly #port: BrokerSettlement<KafkaDelivery>;
  /**
   * Charges the careful records (see AttemptLedger) and keeps their ids in hand across partitions: a
   * producer's duplicate in another partition (another key) is not charged again while the first charge runs.
   */
  readonly #charger: AttemptCharger<KafkaDelivery>;

  constructor(deps: BatchProcessorDeps) {
    this.#deps = deps;
    const options = (this.#options = deps.options);
    this.#resolution = {
      messageId: options.messageId,
      useCoordinatesAsId: options.useCoordinatesAsId,
      logger: options.logger,
    };
    const { ledger } = deps;
    this.#guard = new DeliveryGuard({
      consumer: options.handler,
      features: KAFKA_FEATURES,
      running: () => !deps.isStopping(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
    this.#port = kafkaSettlement(deps.deadLetters, options.pauseOnFailureMs);
    this.#charger = new AttemptCharger({
      consumer: options.handler,
      message: (d) => d.message,
      // Only a careful record not charged yet in this assignment may have been running at a crash.
      mayHaveCrashed: (d) =>
        ledger.isCareful(d.topic, d.partition) && ledger.needsCharge(d.topic, d.partition, d.record.offset),
      logger: options.logger,
      what: 'inboxkit: kafka consumer',
    });
  }

  /** Processes `payload.batch`; rejects only with a group error, after committing what finished. */
  async process(payload: KafkaEachBatchPayload): Promise<void> {
    const { batch } = payload;
    if (batch.messages.length === 0) return;
    const progress: Progress = {
      topic: batch.topic,
      partition: batch.partition,
      payload,
      committable: undefined,
      halted: false,
      groupError: undefined,
    };
    // One timer heartbeats the group while the batch runs, so a long handler does not cost the partition. (It
    // was a timer per record, set and cleared around each handler, plus an awaited heartbeat() after each:
    // the same cadence, since kafkajs sends a heartbeat only once its interval has passed, for more work.)
    const beat = setInterval(() => void this.#heartbeat(progress), this.#options.heartbeatIntervalMs);
    try {
      await this.#run(progress, batch.messages);
    } finally {
      clearInterval(beat);
      await this.#commit(progress);
    }
    if (progress.groupError !== undefined) throw progress.groupError;
  }

  async #run(p: Progress, records: readonly KafkaMessageLike[]): Promise<void> {
    const { ledger } = this.#deps;
    const options = this.#options;
    const pause = options.pauseOnFailureMs;
    const deliveries = records.map((record): KafkaDelivery => ({
      topic: p.topic,
      partition: p.partition,
      record,
      message: toInboundMessage(p.topic, p.partition, record, this.#resolution),
      again: pause,
    }));
    let i = 0;
    while (i < deliveries.length) {
      if (this.#mustYield(p)) return;
      const d = deliveries[i]!;
      if (this.#isSkippedTombstone(d.record)) {
        await this.#settleTombstone(p, d);
        if (!this.#commitOrSeek(p, d)) return;
        i += 1;
      } else if (ledger.isCareful(p.topic, p.partition)) {
        if (!(await this.#runCareful(p, d))) return;
        i += 1;
      } else if (options.mode === 'batch') {
        const end = this.#chunkEnd(records, i, ledger.chunkLimit(p.topic, p.partition, options.batchSize));
        const chunk = deliveries.slice(i, end);
        const outcomes = await this.#guard.handleBatch(chunk.map((c) => c.message));
        ledger.chunkRan(p.topic, p.partition, options.batchSize);
        if (!(await this.#settleChunk(p, chunk, outcomes))) return;
        i = end;
      } else if (options.keyConcurrency > 1) {
        await runKeyConcurrent(deliveries.slice(i), {
          limit: options.keyConcurrency,
          mustYield: () => this.#mustYield(p),
          alone: (c) => this.#isSkippedTombstone(c.record),
          settle: async (c) =>
            this.#isSkippedTombstone(c.record)
              ? this.#settleTombstone(p, c)
              : this.#settle(p, c, await this.#guard.handle(c.message)),
          done: (c) => this.#done(p, c.record),
          redeliver: (c) => this.#redeliver(p, c.record.offset, c.again!),
          logger: options.logger,
        });
        return;
      } else {
        if (!(await this.#settleInOrder(p, d, await this.#guard.handle(d.message)))) return;
        i += 1;
      }
    }
  }

  /**
   * Just after a join, a record the previous holder may have had in flight runs alone, charged a started
   * attempt first (see AttemptLedger); one that had not finished before is one suspect fewer.
   */
  async #runCareful(p: Progress, d: KafkaDelivery): Promise<boolean> {
    const outcome = await this.#charger.charged([d], () => this.#guard.handle(d.message));
    this.#deps.ledger.charged(p.topic, p.partition, d.record.offset);
    this.#charger.settled(d, outcome);
    if (outcome.status !== 'rejected' && ranHandler(outcome))
      this.#deps.ledger.suspectRan(p.topic, p.partition);
    return this.#settleInOrder(p, d, outcome);
  }

  #mustYield(p: Progress): boolean {
    return (
      p.halted ||
      p.groupError !== undefined ||
      this.#deps.isStopping() ||
      !p.payload.isRunning() ||
      p.payload.isStale()
    );
  }

  #isSkippedTombstone(record: KafkaMessageLike): boolean {
    return record.value === null && this.#options.tombstones !== 'handle';
  }

  /** A skipped tombstone is done at once; with `tombstones: 'dead-letter'` it goes to the DLQ. */
  async #settleTombstone(p: Progress, d: KafkaDelivery): Promise<void> {
    if (this.#options.tombstones !== 'skip') {
      const outcome: DeadLetterOutcome = {
        status: 'dead-letter',
        messageId: d.message.id,
        reason: 'tombstone',
        attempts: 0,
      };
      return this.#settle(p, d, outcome);
    }
    this.#options.logger.debug(
      { topic: p.topic, partition: p.partition, offset: d.record.offset },
      'inboxkit: tombstone skipped',
    );
    await this.#port.ack(d);
  }

  /**
   * End (exclusive) of the chunk starting at `from`: at most `limit` records, stopping before a tombstone
   * and before a second record of the same key. A chunk's records are applied together, each in its own
   * savepoint, so one that is retried would otherwise fall behind a later record of its key; with one record
   * per key per chunk, a retry seeks back before any later record of that key ran. (Records without a key
   * carry no order promise beyond the partition and are not limited.)
   */
  #chunkEnd(records: readonly KafkaMessageLike[], from: number, size: number): number {
    const limit = Math.min(records.length, from + size);
    const keys = new Set<string>();
    let end = from;
    while (end < limit) {
      const record = records[end]!;
      if (this.#isSkippedTombstone(record)) break;
      if (record.key !== null) {
        const key = record.key.toString('latin1');
        if (keys.has(key)) break;
        keys.add(key);
      }
      end += 1;
    }
    return end;
  }

  /** Settles `d` through the kit; its verdict (`d.again`) says whether it is done. */
  async #settle(p: Progress, d: KafkaDelivery, outcome: GuardedOutcome): Promise<void> {
    const context = { topic: p.topic, partition: p.partition, offset: d.record.offset };
    const options: SettleOptions = {
      logger: this.#options.logger,
      what: 'inboxkit: kafka consumer',
      context,
    };
    await settle(this.#port, d, outcome, options);
  }

  /**
   * Settles a chunk's outcomes, committing in order up to the first record that is not done: a dead letter is
   * confirmed before any commit past it. The records up to the first retry (or rejection) are settled together,
   * so their dead letters leave in one produce (see DeadLetterProducer); a retry halts the rest as before.
   * False when the rest must wait.
   */
  async #settleChunk(
    p: Progress,
    chunk: readonly KafkaDelivery[],
    outcomes: readonly GuardedOutcome[],
  ): Promise<boolean> {
    let j = 0;
    while (j < chunk.length) {
      let stop = j;
      while (stop < chunk.length && settlesWithoutHalt(outcomes[stop]!)) stop += 1;
      await Promise.all(chunk.slice(j, stop).map((c, k) => this.#settle(p, c, outcomes[j + k]!)));
      for (; j < stop; j += 1) if (!this.#commitOrSeek(p, chunk[j]!)) return false;
      if (j < chunk.length) {
        if (!(await this.#settleInOrder(p, chunk[j]!, outcomes[j]!))) return false;
        j += 1;
      }
    }
    return true;
  }

  /** Settles `d`, then commits up to it or seeks the partition back to it. False when the rest must wait. */
  async #settleInOrder(p: Progress, d: KafkaDelivery, outcome: GuardedOutcome): Promise<boolean> {
    await this.#settle(p, d, outcome);
    return this.#commitOrSeek(p, d);
  }

  /** After `d` settled: commit up to it when done, else seek back to it. False when the rest must wait. */
  #commitOrSeek(p: Progress, d: KafkaDelivery): boolean {
    if (d.again === undefined) {
      this.#done(p, d.record);
      return true;
    }
    this.#redeliver(p, d.record.offset, d.again);
    return false;
  }

  async #heartbeat(p: Progress): Promise<void> {
    try {
      await p.payload.heartbeat();
    } catch (error) {
      // A rebalance ends the batch (and is rethrown so kafkajs rejoins); anything else is retried next beat.
      if (isGroupError(error)) p.groupError ??= error;
      else
        this.#options.logger.warn(
          { err: error, topic: p.topic, partition: p.partition },
          'inboxkit: heartbeat failed',
        );
    }
  }

  /** The record's outcome is durable: it and everything before it may be committed. */
  #done(p: Progress, record: KafkaMessageLike): void {
    p.payload.resolveOffset(record.offset);
    p.committable = nextOffset(record.offset);
  }

  #redeliver(p: Progress, offset: string, delayMs: number): void {
    p.halted = true;
    try {
      this.#deps.scheduler.redeliver(p.topic, p.partition, offset, delayMs);
    } catch (error) {
      // Only when the consumer stopped under us: the uncommitted record is fetched again on the next start.
      this.#options.logger.warn(
        { err: error, topic: p.topic, partition: p.partition, offset },
        'inboxkit: could not seek back',
      );
    }
  }

  async #commit(p: Progress): Promise<void> {
    if (p.committable === undefined) return;
    const offsets = {
      topics: [{ topic: p.topic, partitions: [{ partition: p.partition, offset: p.committable }] }],
    };
    try {
      await p.payload.commitOffsetsIfNecessary(offsets);
    } catch (error) {
      if (isGroupError(error)) p.groupError ??= error;
      // Commits are cumulative: the next one covers this. Until then a restart redelivers, the inbox absorbs it.
      this.#options.logger.warn(
        { err: error, topic: p.topic, partition: p.partition, offset: p.committable },
        'inboxkit: offset commit failed',
      );
    }
  }
}
