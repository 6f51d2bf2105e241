// kafkaConsumer(): the kafkajs transport. It runs the application's kafkajs consumer with manual commits and
// feeds every fetched record to an idempotent consumer; offsets are committed only after outcomes are durable.

import type { TransportConsumer } from '@inboxkit/core';
import { AttemptLedger } from './attempt-ledger.js';
import { BatchProcessor } from './batch-processor.js';
import { DeadLetterProducer } from './dead-letter-producer.js';
import { resolveKafkaConsumerOptions } from './kafka-consumer-options.js';
import type { KafkaConsumerOptions, ResolvedKafkaConsumerOptions } from './kafka-consumer-options.js';
import { RetryScheduler } from './retry-scheduler.js';

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
  readonly #ledger = new AttemptLedger();
  readonly #deadLetters: DeadLetterProducer;
  readonly #scheduler: RetryScheduler;
  readonly #processor: BatchProcessor;
  #state: State = 'idle';
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #removeListeners: (() => void)[] = [];

  constructor(options: ResolvedKafkaConsumerOptions) {
    this.options = options;
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
    const { consumer, logger } = this.options;
    try {
      await this.#deadLetters.start();
      await consumer.connect();
      this.#removeListeners = [
        // A join may change the assignment: attempt bookkeeping starts afresh (see AttemptLedger).
        consumer.on('consumer.group_join', () => this.#ledger.reset()),
        consumer.on('consumer.crash', (event) =>
          logger.error(
            { err: event.payload.error, restart: event.payload.restart },
            'inboxkit: the kafkajs consumer crashed',
          ),
        ),
      ];
      await consumer.subscribe({
        topics: [...this.options.topics],
        fromBeginning: this.options.fromBeginning,
      });
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: this.options.partitionConcurrency,
        eachBatch: (payload) => this.#processor.process(payload),
      });
      this.#state = 'running';
      logger.info(
        { consumer: this.options.handler.name, topics: this.options.topics, mode: this.options.mode },
        'inboxkit: kafka consumer started',
      );
    } catch (error) {
      this.#state = 'stopped';
      this.#detach();
      await this.#deadLetters.stop().catch(() => undefined);
      throw error;
    }
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    // A stop during start waits for the start, then stops what it started.
    await this.#starting?.catch(() => undefined);
    if (this.#state === 'idle' || this.#state === 'stopped') {
      this.#state = 'stopped';
      return;
    }
    const { consumer, logger, closeTimeoutMs } = this.options;
    this.#scheduler.cancel();
    // kafkajs' stop waits for the batches in flight (each ends after its current record and commits what
    // finished), then leaves the group.
    const stopped = consumer.stop();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      stopped.then(
        () => false,
        (error: unknown) => {
          logger.warn({ err: error }, 'inboxkit: the kafkajs consumer failed to stop cleanly');
          return false;
        },
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), closeTimeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
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
