// kafkaConsumer(): the kafkajs transport. It runs the application's kafkajs consumer with manual commits and
// feeds every fetched record to an idempotent consumer; offsets are committed only after outcomes are durable.

import type { TransportConsumer } from '@inboxkit/core';
import { AttemptLedger } from './attempt-ledger.js';
import { BatchProcessor } from './batch-processor.js';
import { DeadLetterProducer } from './dead-letter-producer.js';
import { resolveKafkaConsumerOptions } from './kafka-consumer-options.js';
import type { KafkaConsumerOptions, ResolvedKafkaConsumerOptions } from './kafka-consumer-options.js';
import { RetryScheduler } from './retry-scheduler.js';
import { retryStart, settledWithin, startRetryDelay } from '@inboxkit/core';
import { kafkaStartFailure } from './start-retry.js';

/** A running Kafka transport. */
export interface KafkaTransportConsumer extends TransportConsumer {
  /** The validated options, every default filled in. */
  readonly options: ResolvedKafkaConsumerOptions;
}

/**
 * Consumes `topics` with the application's kafkajs consumer and hands each record to `handler` (an
 * `idempotentConsumer()`). Offsets are committed (manually, `autoCommit: false`) only once a record's
 * outcome is durable — its effect committed, or its dead letter confirmed by Kafka — and never past an
 * earlier record of the partition that is not. Records of a partition are handled in offset order;
 * `partitionConcurrency` partitions at a time. A retry pauses the partition, seeks back to the record and
 * resumes after the delay. Options are validated here; a ConfigurationError says what to change.
 *
 * Lifecycle: `start()` connects the consumer (kafkajs' connect is idempotent), subscribes and runs it;
 * `stop()` stops it (which leaves the group), waits up to `closeTimeoutMs` for records in flight, commits
 * what finished and disconnects the dead-letter producer it created. The application disconnects the
 * consumer it created, after `stop()`. A stopped transport cannot be started again; create a new one.
 *
 * @example
 * const kafka = new Kafka({ brokers: ['localhost:9092'] });
 * const transport = kafkaConsumer({
 *   consumer: kafka.consumer({ groupId: 'payments' }),
 *   kafka,
 *   topics: ['payments'],
 *   handler: idempotentConsumer({ name: 'payments', store, handler: applyPayment }),
 * });
 * await transport.start();
 * // … on shutdown:
 * await transport.stop();
 */
export function kafkaConsumer<P, Tx>(options: KafkaConsumerOptions<P, Tx>): KafkaTransportConsumer {
  return new KafkaTransport(resolveKafkaConsumerOptions(options));
}

type State = 'idle' | 'starting' | 'running' | 'stopped';

class KafkaTransport implements KafkaTransportConsumer {
  readonly options: ResolvedKafkaConsumerOptions;
  readonly #ledger: AttemptLedger;
  readonly #deadLetters: DeadLetterProducer;
  readonly #scheduler: RetryScheduler;
  readonly #processor: BatchProcessor;
  #state: State = 'idle';
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #removeListeners: (() => void)[] = [];
  /** Aborted by stop(): ends a start that is still trying to connect. */
  readonly #startAbort = new AbortController();
  /** While an attempt waits for the group join: settled by the join or a final crash. */
  #join: Deferred | undefined;
  /** The clean-up of a start attempt that stop() or the start timeout left running. */
  #abandoned: Promise<void> | undefined;

  constructor(options: ResolvedKafkaConsumerOptions) {
    this.options = options;
    // The most records of one partition that can be in flight at a crash: its keyConcurrency, or one chunk.
    this.#ledger = new AttemptLedger(options.mode === 'batch' ? 1 : options.keyConcurrency);
    this.#deadLetters = new DeadLetterProducer({
      consumerName: options.handler.name,
      topicFor: options.deadLetterTopic,
      timeoutMs: options.publishTimeoutMs,
      producer: options.producer,
      kafka: options.kafka,
    });
    this.#scheduler = new RetryScheduler(options.consumer, options.logger);
    this.#processor = new BatchProcessor({
      options,
      ledger: this.#ledger,
      deadLetters: this.#deadLetters,
      scheduler: this.#scheduler,
      isStopping: () => this.#stopping !== undefined,
    });
  }

  start(): Promise<void> {
    if (this.#state !== 'idle') {
      return Promise.reject(
        new Error(
          `kafkaConsumer.start() was already called (state: ${this.#state}); create a new transport to start again`,
        ),
      );
    }
    this.#starting = this.#start();
    return this.#starting;
  }

  async #start(): Promise<void> {
    this.#state = 'starting';
    const o = this.options;
    const { consumer, logger } = o;
    this.#removeListeners = [
      consumer.on('consumer.group_join', () => {
        // A join may change the assignment: attempt bookkeeping starts afresh (see AttemptLedger).
        this.#ledger.reset();
        this.#join?.resolve();
      }),
      consumer.on('consumer.crash', (event) => {
        const { error, restart } = event.payload;
        if (this.#state === 'starting' && this.#join !== undefined) {
          // The group could not be joined yet (no coordinator, a broker restarting): kafkajs restarts the
          // consumer by itself when it can; otherwise the start fails.
          if (restart) {
            logger.warn(
              {
                err: error,
                consumer: o.handler.name,
                retryInMs: (error as { retryTime?: number }).retryTime,
              },
              'inboxkit: kafka consumer cannot join its group at start; kafkajs restarts it',
            );
          } else this.#join.reject(error);
          return;
        }
        logger.error({ err: error, restart }, 'inboxkit: the kafkajs consumer crashed');
      }),
    ];
    let started: { readonly value: void } | undefined;
    try {
      started = await retryStart({
        attempt: () => this.#startOnce(),
        permanent: kafkaStartFailure,
        delayMs: (attempt) => startRetryDelay(attempt, o.startRetryInitialDelayMs, o.startRetryMaxDelayMs),
        timeoutMs: o.startTimeoutMs,
        signal: this.#startAbort.signal,
        abandon: (attempt) => {
          // An attempt waiting for the join would wait for ever once kafkajs is stopped: end it now.
          this.#join?.reject(new Error('kafkaConsumer: start abandoned'));
          this.#abandoned = attempt.then(
            () => this.#undoStart(),
            () => this.#undoStart(),
          );
        },
        logger,
        what: 'inboxkit: kafka consumer',
        context: { consumer: o.handler.name, topics: o.topics },
      });
    } catch (error) {
      this.#state = 'stopped';
      this.#detach();
      // An attempt still in flight (a kafkajs connect within its own retries) is undone once it ends; stop()
      // waits for that.
      if (this.#abandoned === undefined) await this.#undoStart();
      throw error;
    } finally {
      this.#join = undefined;
    }
    if (started === undefined) {
      // stop() was called: undo what the attempts did (the attempt in flight, once it has settled).
      this.#state = 'stopped';
      this.#detach();
      this.#abandoned ??= this.#undoStart();
      return;
    }
    this.#state = 'running';
    logger.info(
      { consumer: o.handler.name, topics: o.topics, mode: o.mode },
      'inboxkit: kafka consumer started',
    );
  }

  /** One attempt: connect, subscribe, run, and wait until the group is joined. */
  async #startOnce(): Promise<void> {
    const { consumer } = this.options;
    const signal = this.#startAbort.signal;
    const stillStarting = (): void => {
      if (signal.aborted) throw new Error('kafkaConsumer: stopped during start');
    };
    await this.#deadLetters.start();
    stillStarting();
    await consumer.connect();
    stillStarting();
    await consumer.subscribe({ topics: [...this.options.topics], fromBeginning: this.options.fromBeginning });
    stillStarting();
    const join = deferred();
    this.#join = join;
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.options.partitionConcurrency,
      eachBatch: (payload) => this.#processor.process(payload),
    });
    // kafkajs' run() returns after the first join, or after a failed one (it then restarts by itself, or
    // crashes for good): wait for the join, or the crash.
    await join.promise;
  }

  /** Stops what a failed or stopped start left running: kafkajs' restarts, the dead-letter producer. */
  async #undoStart(): Promise<void> {
    const { consumer, logger } = this.options;
    await consumer
      .stop()
      .catch((error: unknown) =>
        logger.debug({ err: error }, 'inboxkit: consumer.stop() after a failed start'),
      );
    await this.#deadLetters
      .stop()
      .catch((error: unknown) =>
        logger.debug({ err: error }, 'inboxkit: dead-letter producer disconnect failed'),
      );
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const { consumer, logger, closeTimeoutMs } = this.options;
    // A stop during start ends the start (its pauses at once; an attempt in flight is left to finish, then
    // undone, within closeTimeoutMs).
    this.#startAbort.abort();
    await this.#starting?.catch(() => undefined);
    if (this.#abandoned !== undefined) await settledWithin(this.#abandoned, closeTimeoutMs);
    if (this.#state === 'idle' || this.#state === 'stopped') {
      this.#state = 'stopped';
      return;
    }
    this.#scheduler.cancel();
    // kafkajs' stop waits for the batches in flight (each ends after its current record and commits what
    // finished), then leaves the group.
    const stopped = consumer.stop().catch((error: unknown) => {
      logger.warn({ err: error }, 'inboxkit: the kafkajs consumer failed to stop cleanly');
    });
    const timedOut = !(await settledWithin(stopped, closeTimeoutMs));
    if (timedOut) {
      logger.warn(
        { consumer: this.options.handler.name, closeTimeoutMs },
        'inboxkit: records still in flight after closeTimeoutMs; they will be redelivered and absorbed by the inbox',
      );
    }
    this.#detach();
    await this.#deadLetters
      .stop()
      .catch((error: unknown) =>
        logger.warn({ err: error }, 'inboxkit: dead-letter producer disconnect failed'),
      );
    this.#state = 'stopped';
    logger.info({ consumer: this.options.handler.name }, 'inboxkit: kafka consumer stopped');
  }

  #detach(): void {
    for (const remove of this.#removeListeners) remove();
    this.#removeListeners = [];
  }
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
