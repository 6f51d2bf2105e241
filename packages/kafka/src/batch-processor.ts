// Processes one fetched batch of one partition: counts attempts, hands records to the idempotent consumer in
// offset order, maps each outcome to Kafka's action, and commits the offset after the last record whose
// outcome is durable — never past one that is not.

import type { DeadLetterOutcome, InboundMessage, Outcome } from '@inboxkit/core';
import type { AttemptLedger } from './attempt-ledger.js';
import type { DeadLetter, DeadLetterProducer } from './dead-letter-producer.js';
import type { KafkaEachBatchPayload, KafkaMessageLike } from './kafka-client-types.js';
import type { ResolvedKafkaConsumerOptions } from './kafka-consumer-options.js';
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
  /**
   * Ids of careful records being charged and run right now, across partitions: a producer's duplicate in
   * another partition (another key) must not be charged a second time while the first charge is not consumed.
   */
  readonly #charging = new Set<string>();

  constructor(deps: BatchProcessorDeps) {
    this.#deps = deps;
    this.#options = deps.options;
    this.#resolution = {
      messageId: deps.options.messageId,
      useCoordinatesAsId: deps.options.useCoordinatesAsId,
      logger: deps.options.logger,
    };
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
    const ledger = this.#deps.ledger;
    const options = this.#options;
    const messages = records.map((r) => toInboundMessage(p.topic, p.partition, r, this.#resolution));
    const count = records.length;
    let i = 0;
    while (i < count) {
      if (this.#mustYield(p)) return;
      const record = records[i]!;
      const message = messages[i]!;
      if (this.#isSkippedTombstone(record)) {
        if (!(await this.#settleTombstone(p, record, message))) return;
        i += 1;
      } else if (ledger.isCareful(p.topic, p.partition)) {
        // Just after a join: the records the previous holder may have had in flight run alone, each charged an
        // attempt first (see AttemptLedger).
        const id = message.id;
        const mine = id !== undefined && !this.#charging.has(id);
        if (mine) this.#charging.add(id);
        let outcome: Outcome;
        try {
          if (!(await this.#charge(p, record, message, mine))) return;
          outcome = await this.#handle(p, message);
        } finally {
          if (mine) this.#charging.delete(id);
        }
        if (ranHandler(outcome)) ledger.suspectRan(p.topic, p.partition);
        if (!(await this.#settle(p, record, message, outcome))) return;
        i += 1;
      } else if (options.mode === 'batch') {
        const end = this.#chunkEnd(records, i, ledger.chunkLimit(p.topic, p.partition, options.batchSize));
        const outcomes = await this.#handleBatch(p, messages.slice(i, end));
        ledger.chunkRan(p.topic, p.partition, options.batchSize);
        if (!(await this.#settleChunk(p, records, messages, outcomes, i, end))) return;
        i = end;
      } else if (options.keyConcurrency > 1) {
        await this.#runKeyConcurrent(p, records, messages, i);
        return;
      } else {
        const outcome = await this.#handle(p, message);
        if (!(await this.#settle(p, record, message, outcome))) return;
        i += 1;
      }
    }
  }

  /**
   * Message mode with `keyConcurrency` > 1, from `from` to the end of the batch (past the careful records):
   * up to keyConcurrency records of the partition run at once, at most one per key, dispatched in offset
   * order (a record whose key is busy waits, and so does everything behind it). The committable offset only
   * follows the unbroken run of finished records; at the first record that needs a redelivery nothing more is
   * dispatched, the records in flight finish, and the partition seeks back to it.
   */
  async #runKeyConcurrent(
    p: Progress,
    records: readonly KafkaMessageLike[],
    messages: readonly InboundMessage[],
    from: number,
  ): Promise<void> {
    const limit = this.#options.keyConcurrency;
    const finished = new Array<boolean>(records.length).fill(false);
    const busyKeys = new Set<string>();
    const inFlight = new Set<Promise<void>>();
    let next = from;
    let watermark = from;
    let redeliverAt: number | undefined;
    let redeliverIn = 0;
    const needsRedelivery = (index: number, delayMs: number): void => {
      if (redeliverAt === undefined || index < redeliverAt) {
        redeliverAt = index;
        redeliverIn = delayMs;
      }
    };
    for (;;) {
      while (
        next < records.length &&
        inFlight.size < limit &&
        redeliverAt === undefined &&
        !this.#mustYield(p)
      ) {
        const record = records[next]!;
        if (this.#isSkippedTombstone(record)) {
          // A tombstone is settled alone, in order: once everything before it finished.
          if (inFlight.size > 0 || watermark < next) break;
          if (!(await this.#settleTombstone(p, record, messages[next]!))) return;
          next += 1;
          watermark = next;
          continue;
        }
        const key = record.key === null ? undefined : record.key.toString('latin1');
        if (key !== undefined && busyKeys.has(key)) break;
        const index = next;
        next += 1;
        if (key !== undefined) busyKeys.add(key);
        const run = (async () => {
          try {
            const outcome = await this.#handle(p, messages[index]!);
            const delay = await this.#redeliveryDelay(p, record, messages[index]!, outcome);
            if (delay === undefined) finished[index] = true;
            else needsRedelivery(index, delay);
          } catch (error) {
            this.#options.logger.error(
              { err: error, topic: p.topic, partition: p.partition, offset: record.offset },
              'inboxkit: settling a record failed unexpectedly; it is redelivered',
            );
            needsRedelivery(index, this.#options.pauseOnFailureMs);
          } finally {
            if (key !== undefined) busyKeys.delete(key);
          }
        })();
        const tracked = run.finally(() => inFlight.delete(tracked));
        inFlight.add(tracked);
      }
      if (inFlight.size === 0) break;
      await Promise.race(inFlight);
      let advanced = false;
      while (watermark < next && finished[watermark]) {
        watermark += 1;
        advanced = true;
      }
      if (advanced) this.#done(p, records[watermark - 1]!);
    }
    if (redeliverAt !== undefined) this.#redeliver(p, records[redeliverAt]!.offset, redeliverIn);
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

  /**
   * Records durably that an attempt of the careful record starts, unless it was charged already in this
   * assignment (a retry or an outage brought the partition back to it) or its id is being charged and run in
   * another partition (`alone` false). On failure the partition is redelivered from the record later. A record
   * without an id has no inbox row to charge.
   */
  async #charge(
    p: Progress,
    record: KafkaMessageLike,
    message: InboundMessage,
    alone: boolean,
  ): Promise<boolean> {
    const ledger = this.#deps.ledger;
    if (message.id === undefined || !ledger.needsCharge(p.topic, p.partition, record.offset)) return true;
    // The same id is charged and running in another partition right now: that charge covers this attempt.
    if (!alone) return true;
    try {
      await this.#options.handler.recordAttemptsStarted([message]);
    } catch (error) {
      this.#options.logger.error(
        { err: error, topic: p.topic, partition: p.partition, offset: record.offset },
        'inboxkit: could not record the attempt; the partition is paused and retried',
      );
      this.#redeliver(p, record.offset, this.#options.pauseOnFailureMs);
      return false;
    }
    ledger.charged(p.topic, p.partition, record.offset);
    return true;
  }

  /** `handler.handle` with the group heartbeated meanwhile. It never rejects by contract; if it does, retry later. */
  async #handle(p: Progress, message: InboundMessage): Promise<Outcome> {
    try {
      return await this.#options.handler.handle(message);
    } catch (error) {
      return this.#unexpected(p, error, message);
    }
  }

  async #handleBatch(p: Progress, messages: readonly InboundMessage[]): Promise<readonly Outcome[]> {
    try {
      const outcomes = await this.#options.handler.handleBatch(messages);
      if (outcomes.length === messages.length) return outcomes;
      throw new Error(`handleBatch returned ${outcomes.length} outcomes for ${messages.length} messages`);
    } catch (error) {
      const retry = this.#unexpected(p, error, messages[0]!);
      return messages.map(() => retry);
    }
  }

  #unexpected(p: Progress, error: unknown, message: InboundMessage): Outcome {
    this.#options.logger.error(
      { err: error, topic: p.topic, partition: p.partition, offset: message.source.offset },
      'inboxkit: the idempotent consumer failed unexpectedly; the record is retried',
    );
    return {
      status: 'retry',
      messageId: message.id ?? '',
      delayMs: this.#options.pauseOnFailureMs,
      attempt: 0,
      reason: 'store-unavailable',
    };
  }

  async #heartbeat(p: Progress): Promise<void> {
    try {
      await p.payload.heartbeat();
    } catch (error) {
      this.#heartbeatFailed(p, error);
    }
  }

  /** A rebalance ends the batch (and is rethrown so kafkajs rejoins); anything else is retried by the next beat. */
  #heartbeatFailed(p: Progress, error: unknown): void {
    if (isGroupError(error)) p.groupError ??= error;
    else
      this.#options.logger.warn(
        { err: error, topic: p.topic, partition: p.partition },
        'inboxkit: heartbeat failed',
      );
  }

  /** Maps one outcome to Kafka's action. False when the rest of the batch must wait for a redelivery. */
  async #settle(
    p: Progress,
    record: KafkaMessageLike,
    message: InboundMessage,
    outcome: Outcome,
  ): Promise<boolean> {
    const redeliverIn = await this.#redeliveryDelay(p, record, message, outcome);
    if (redeliverIn === undefined) {
      this.#done(p, record);
      return true;
    }
    this.#redeliver(p, record.offset, redeliverIn);
    return false;
  }

  /**
   * Does what the outcome needs before the record may be committed (a dead letter is produced and confirmed).
   * `undefined` when the record is done; otherwise the delay after which it must be delivered again.
   */
  async #redeliveryDelay(
    p: Progress,
    record: KafkaMessageLike,
    message: InboundMessage,
    outcome: Outcome,
  ): Promise<number | undefined> {
    switch (outcome.status) {
      case 'processed':
      case 'duplicate':
        return undefined;
      case 'retry':
        return outcome.delayMs;
      case 'dead-letter':
        return (await this.#produceDeadLetters(p, [{ record, message, outcome }]))
          ? undefined
          : this.#options.pauseOnFailureMs;
    }
  }

  /** Settles a chunk's outcomes in order up to the first retry; dead letters are produced before any commit. */
  async #settleChunk(
    p: Progress,
    records: readonly KafkaMessageLike[],
    messages: readonly InboundMessage[],
    outcomes: readonly Outcome[],
    from: number,
    to: number,
  ): Promise<boolean> {
    const firstRetry = outcomes.findIndex((o) => o.status === 'retry');
    const settled = firstRetry === -1 ? to - from : firstRetry;
    const deadLetters: DeadLetter[] = [];
    for (let j = 0; j < settled; j += 1) {
      const outcome = outcomes[j]!;
      if (outcome.status === 'dead-letter')
        deadLetters.push({ record: records[from + j]!, message: messages[from + j]!, outcome });
    }
    if (deadLetters.length > 0 && !(await this.#produceDeadLetters(p, deadLetters))) {
      // Commit up to the first dead letter; it (and all after it) comes back after the pause.
      const firstDead = outcomes.findIndex((o) => o.status === 'dead-letter');
      if (firstDead > 0) this.#done(p, records[from + firstDead - 1]!);
      this.#redeliver(p, records[from + firstDead]!.offset, this.#options.pauseOnFailureMs);
      return false;
    }
    if (settled > 0) this.#done(p, records[from + settled - 1]!);
    if (firstRetry === -1) return true;
    const retry = outcomes[firstRetry]!;
    this.#redeliver(p, records[from + firstRetry]!.offset, retry.status === 'retry' ? retry.delayMs : 0);
    return false;
  }

  async #settleTombstone(p: Progress, record: KafkaMessageLike, message: InboundMessage): Promise<boolean> {
    if (this.#options.tombstones === 'skip') {
      this.#options.logger.debug(
        { topic: p.topic, partition: p.partition, offset: record.offset },
        'inboxkit: tombstone skipped',
      );
      this.#done(p, record);
      return true;
    }
    const outcome: DeadLetterOutcome = {
      status: 'dead-letter',
      messageId: message.id,
      reason: 'tombstone',
      attempts: 0,
    };
    return this.#deadLetter(p, [{ record, message, outcome }]);
  }

  async #deadLetter(p: Progress, deadLetters: readonly DeadLetter[]): Promise<boolean> {
    if (!(await this.#produceDeadLetters(p, deadLetters))) {
      this.#redeliver(p, deadLetters[0]!.record.offset, this.#options.pauseOnFailureMs);
      return false;
    }
    this.#done(p, deadLetters[deadLetters.length - 1]!.record);
    return true;
  }

  async #produceDeadLetters(p: Progress, deadLetters: readonly DeadLetter[]): Promise<boolean> {
    try {
      await this.#deps.deadLetters.send(p.topic, deadLetters);
      return true;
    } catch (error) {
      this.#options.logger.error(
        {
          err: error,
          topic: p.topic,
          partition: p.partition,
          offset: deadLetters[0]!.record.offset,
          deadLetterTopic: this.#deps.deadLetters.topicFor(p.topic),
        },
        'inboxkit: could not produce a dead letter (does the dead-letter topic exist?); not committing, retrying after a pause',
      );
      return false;
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
