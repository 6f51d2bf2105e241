// The options of kafkaConsumer(), their defaults, and their one validation (at creation): every problem is a
// ConfigurationError that says what to change. The resolved options are frozen.

import { attemptLedgerOf, ConfigurationError, optionChecks, transportLogger } from '@inboxkit/core';
import type { IdempotentConsumer, Logger } from '@inboxkit/core';
import type { KafkaClientLike, KafkaConsumerLike, KafkaProducerLike } from './kafka-client-types.js';
import type { KafkaRecord } from './to-inbound-message.js';

/** What to do with a tombstone (a record whose value is null, a delete marker on a compacted topic). */
export type TombstonePolicy = 'dead-letter' | 'skip' | 'handle';

/** Options of `kafkaConsumer()`. */
export interface KafkaConsumerOptions<P = unknown, Tx = unknown> {
  /**
   * A kafkajs consumer the application created (`kafka.consumer({ groupId, … })`). The transport calls
   * `connect` (idempotent), `subscribe`, `run` and, in `stop()`, `stop`; it never disconnects it: the
   * application disconnects what it created, after `stop()`.
   */
  readonly consumer: KafkaConsumerLike;
  /**
   * The kafkajs client: the transport creates the dead-letter producer from it (idempotent, acks -1),
   * connects it in `start()` and disconnects it in `stop()`. Pass this or `producer`.
   */
  readonly kafka?: KafkaClientLike;
  /**
   * A connected producer of the application for dead letters, used instead of creating one; make it
   * idempotent. Never disconnected by the transport. Pass this or `kafka`.
   */
  readonly producer?: KafkaProducerLike;
  /** Topics to consume. Each needs its dead-letter topic to exist (or broker auto-creation). */
  readonly topics: readonly string[];
  /** The idempotent consumer (`idempotentConsumer({ name, store, handler })`) each record is handed to. */
  readonly handler: IdempotentConsumer<P, Tx>;
  /**
   * `message`: each record is handled in its own transaction, in offset order. `batch`: the records of a
   * fetch are claimed and applied together with `handleBatch`, one transaction per chunk (at most `batchSize`
   * records, at most one per key), for throughput. Order per key holds in both modes, also across retries;
   * in `batch` mode a retried record may be applied after later records of *other* keys. Default is `message`.
   */
  readonly mode?: 'message' | 'batch';
  /** Partitions processed at once (kafkajs `partitionsConsumedConcurrently`). Default is 1. */
  readonly partitionConcurrency?: number;
  /**
   * In `message` mode, how many records of one partition may run at once: at most one per key (records without
   * a key are not limited), dispatched in offset order, committed only up to the first unfinished one. Order
   * per key holds, also across retries; order across keys of a partition does not. Default is 1 (strict
   * partition order).
   */
  readonly keyConcurrency?: number;
  /** In `batch` mode, the most records handed to one `handleBatch` call. Default is 500. */
  readonly batchSize?: number;
  /**
   * Finds the id of a record that has neither a `message-id` nor a `ce_id` header (a business key in the
   * payload, say). Return `undefined` when there is none. Default: none.
   */
  readonly messageId?: (record: KafkaRecord) => string | undefined;
  /**
   * Use `topic:partition:offset` as the id of a record that has no other id. This only catches redeliveries of
   * the same record (after a crash or rebalance), never a producer that sent the same intent twice (two
   * records, two offsets). Default is false: such records are dead-lettered with reason `missing-id`.
   */
  readonly useCoordinatesAsId?: boolean;
  /** The dead-letter topic of a source topic. Default is `` `${topic}.dlq` ``. */
  readonly deadLetterTopic?: (topic: string) => string;
  /**
   * Tombstones (null value): `dead-letter` produces them to the DLQ with reason `tombstone`; `skip` commits
   * them without calling the handler (logged at debug); `handle` gives them to the consumer like any record
   * (the default decoder then dead-letters them as `undecodable`; a custom `decode` may accept null).
   * Default is `dead-letter`: nothing is dropped unless you say so.
   */
  readonly tombstones?: TombstonePolicy;
  /** Where a group with no committed offset starts (kafkajs `fromBeginning`). Default is false (latest). */
  readonly fromBeginning?: boolean;
  /**
   * How long `stop()` waits for in-flight records before it returns; what finished by then is committed,
   * the rest is redelivered later (and absorbed by the inbox). Default is 30,000 ms.
   */
  readonly closeTimeoutMs?: number;
  /** How long a dead-letter produce may take to be confirmed before it counts as failed. Default is 30,000 ms. */
  readonly publishTimeoutMs?: number;
  /**
   * How long a partition is paused when a dead letter could not be produced or attempts could not be
   * recorded, before its record is tried again. Default is 1,000 ms.
   */
  readonly pauseOnFailureMs?: number;
  /**
   * How often the group is heartbeated while a fetched batch runs, so a long handler does not cost the partition.
   * Keep it at or below the consumer's `heartbeatInterval`. Default is 3,000 ms (kafkajs's default).
   */
  readonly heartbeatIntervalMs?: number;
  /**
   * @deprecated Ignored, and logged as a warning when set: attempts are counted on resume for every consumer
   * (docs/kafka.md, "Attempts and crash loops"). After a group join the first unfinished records of each
   * partition (as many as `keyConcurrency`) run one at a time with an attempt recorded first; nothing is
   * recorded in steady state, so a crash or a rebalance costs an attempt only to a record that was running.
   * A record that kills its process on every attempt is dead-lettered after `maxAttempts + 1` deaths
   * (`'every-batch'` took `maxAttempts`, but charged every record of a fetched batch for each crash, healthy
   * ones included). `'after-join'` was this rule already. Remove the option; to keep a crash loop at
   * `maxAttempts` deaths, lower `maxAttempts` by one.
   */
  readonly countStartedAttempts?: 'every-batch' | 'after-join';
  /**
   * How long `start()` keeps trying to reach Kafka and join the group (brokers down or starting, no group
   * coordinator yet, timeouts) before it rejects with a `StartTimeoutError`. Errors no retry fixes (SASL or
   * ACLs refused, invalid settings) reject at once whatever this is. Default is `Infinity`: once running,
   * kafkajs never gives up on a lost broker either, and a consumer started during an outage should behave like
   * one that was running through it (as Spring Kafka's does).
   */
  readonly startTimeoutMs?: number;
  /**
   * The pause between start attempts: doubling from `initialDelayMs` to `maxDelayMs`, with jitter (the same
   * backoff, and defaults, as the RabbitMQ transport's reconnect). Each attempt is a kafkajs `connect()`, which
   * first retries by itself with the client's `retry` settings. Default is 500 ms up to 30,000 ms.
   */
  readonly startRetry?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  /** Default is the idempotent consumer's logger. */
  readonly logger?: Logger;
}

/** The options with every default filled in. */
export interface ResolvedKafkaConsumerOptions {
  readonly consumer: KafkaConsumerLike;
  readonly kafka: KafkaClientLike | undefined;
  readonly producer: KafkaProducerLike | undefined;
  readonly topics: readonly string[];
  readonly handler: IdempotentConsumer<unknown, unknown>;
  readonly mode: 'message' | 'batch';
  readonly partitionConcurrency: number;
  readonly keyConcurrency: number;
  readonly batchSize: number;
  readonly messageId: ((record: KafkaRecord) => string | undefined) | undefined;
  readonly useCoordinatesAsId: boolean;
  readonly deadLetterTopic: (topic: string) => string;
  readonly tombstones: TombstonePolicy;
  readonly fromBeginning: boolean;
  readonly closeTimeoutMs: number;
  readonly publishTimeoutMs: number;
  readonly pauseOnFailureMs: number;
  readonly heartbeatIntervalMs: number;
  readonly startTimeoutMs: number;
  readonly startRetryInitialDelayMs: number;
  readonly startRetryMaxDelayMs: number;
  readonly logger: Logger;
}

const check = optionChecks('kafkaConsumer');

function hasMethods(value: unknown, methods: readonly string[]): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function')
  );
}

/** Validates once and fills defaults. Throws a ConfigurationError that says what to change. */
export function resolveKafkaConsumerOptions<P, Tx>(
  options: KafkaConsumerOptions<P, Tx>,
): ResolvedKafkaConsumerOptions {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('kafkaConsumer needs an options object');
  if (
    !hasMethods(options.consumer, ['connect', 'subscribe', 'run', 'stop', 'seek', 'pause', 'resume', 'on'])
  ) {
    throw new ConfigurationError(
      'kafkaConsumer `consumer` must be a kafkajs consumer: kafka.consumer({ groupId })',
    );
  }
  if (options.kafka !== undefined && options.producer !== undefined) {
    throw new ConfigurationError('kafkaConsumer takes `kafka` or `producer` for dead letters, not both');
  }
  if (options.kafka === undefined && options.producer === undefined) {
    throw new ConfigurationError(
      'kafkaConsumer needs `kafka` (the kafkajs client, to create the dead-letter producer) or `producer` (a connected producer)',
    );
  }
  if (options.kafka !== undefined && !hasMethods(options.kafka, ['producer'])) {
    throw new ConfigurationError('kafkaConsumer `kafka` must be a kafkajs client: new Kafka({ brokers })');
  }
  if (options.producer !== undefined && !hasMethods(options.producer, ['sendBatch'])) {
    throw new ConfigurationError(
      'kafkaConsumer `producer` must be a kafkajs producer: kafka.producer({ idempotent: true })',
    );
  }
  if (!hasMethods(options.handler, ['handle', 'handleBatch']) || attemptLedgerOf(options.handler) === undefined) {
    throw new ConfigurationError(
      'kafkaConsumer `handler` must be an idempotent consumer: idempotentConsumer({ name, store, handler })',
    );
  }
  const topics = options.topics;
  if (
    !Array.isArray(topics) ||
    topics.length === 0 ||
    topics.some((t) => typeof t !== 'string' || t === '')
  ) {
    throw new ConfigurationError('kafkaConsumer `topics` must be a non-empty array of topic names');
  }
  if (new Set(topics).size !== topics.length)
    throw new ConfigurationError('kafkaConsumer `topics` lists a topic twice');
  const deadLetterTopic =
    check.optionalFunction('deadLetterTopic', options.deadLetterTopic) ?? ((t: string) => `${t}.dlq`);
  for (const topic of topics) {
    const dlq = deadLetterTopic(topic);
    if (typeof dlq !== 'string' || dlq === '') {
      throw new ConfigurationError(`kafkaConsumer deadLetterTopic('${topic}') must return a topic name`);
    }
    if (topics.includes(dlq)) {
      throw new ConfigurationError(
        `kafkaConsumer deadLetterTopic('${topic}') is '${dlq}', a topic it consumes; dead letters would loop`,
      );
    }
  }
  const mode = check.oneOf('mode', options.mode, ['message', 'batch'], 'message');
  const keyConcurrency = check.integer('keyConcurrency', options.keyConcurrency, 1);
  if (keyConcurrency > 1 && mode !== 'message') {
    throw new ConfigurationError(
      "kafkaConsumer keyConcurrency applies to mode 'message'; remove it or use mode 'message'",
    );
  }
  const startTimeoutMs = check.positiveMs('startTimeoutMs', options.startTimeoutMs, Infinity);
  const startRetry = check.backoff('startRetry', options.startRetry, true);
  const logger = transportLogger(options.logger, options.handler);
  const counting = check.oneOf(
    'countStartedAttempts',
    options.countStartedAttempts,
    ['every-batch', 'after-join'],
    'after-join',
  );
  if (options.countStartedAttempts !== undefined) {
    logger.warn(
      { countStartedAttempts: counting },
      'inboxkit: kafkaConsumer countStartedAttempts is deprecated and ignored: attempts are counted on resume ' +
        '(a crash loop is dead-lettered after maxAttempts + 1 deaths); remove the option (docs/kafka.md, "Attempts and crash loops")',
    );
  }
  return Object.freeze({
    consumer: options.consumer,
    kafka: options.kafka,
    producer: options.producer,
    topics: Object.freeze([...topics]),
    handler: options.handler as unknown as IdempotentConsumer<unknown, unknown>,
    mode,
    partitionConcurrency: check.integer('partitionConcurrency', options.partitionConcurrency, 1),
    keyConcurrency,
    batchSize: check.integer('batchSize', options.batchSize, 500),
    messageId: check.optionalFunction('messageId', options.messageId),
    useCoordinatesAsId: check.optionalBoolean('useCoordinatesAsId', options.useCoordinatesAsId, false),
    deadLetterTopic,
    tombstones: check.oneOf(
      'tombstones',
      options.tombstones,
      ['dead-letter', 'skip', 'handle'],
      'dead-letter',
    ),
    fromBeginning: check.optionalBoolean('fromBeginning', options.fromBeginning, false),
    closeTimeoutMs: check.integer('closeTimeoutMs', options.closeTimeoutMs, 30_000),
    publishTimeoutMs: check.integer('publishTimeoutMs', options.publishTimeoutMs, 30_000),
    pauseOnFailureMs: check.integer('pauseOnFailureMs', options.pauseOnFailureMs, 1_000),
    heartbeatIntervalMs: check.integer('heartbeatIntervalMs', options.heartbeatIntervalMs, 3_000),
    startTimeoutMs,
    startRetryInitialDelayMs: startRetry.initialDelayMs,
    startRetryMaxDelayMs: startRetry.maxDelayMs,
    logger,
  });
}
