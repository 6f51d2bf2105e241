// The options of rabbitmqConsumer(), their defaults, and their one validation.

import { ConfigurationError, optionChecks, transportLogger } from '@inboxkit/core';
import type { InboundMessage, Logger, Outcome } from '@inboxkit/core';
import type { AmqpConnection, AmqpMessage } from './amqp-types.js';
import { resolveTopology } from './declare-topology.js';
import type { DeclaredTopology, TopologyOptions } from './declare-topology.js';

/**
 * The slice of core's `IdempotentConsumer` the transport drives; any `idempotentConsumer(...)` fits,
 * whatever its payload and transaction types (its attempt ledger, off this interface, is read by the
 * delivery kit: a wrapper forwards it with `withAttemptLedger`).
 */
export interface RabbitmqConsumerHandler {
  readonly name: string;
  readonly config: { readonly maxAttempts: number; readonly logger?: Logger | undefined };
  handle(message: InboundMessage): Promise<Outcome>;
  handleBatch(messages: readonly InboundMessage[]): Promise<Outcome[]>;
}

/** How the consumer declares (or only names) its queues. */
export interface RabbitmqTopologySettings extends Omit<TopologyOptions, 'queue' | 'maxAttempts'> {
  /**
   * Declare the topology on every (re)connect. `false` when operators declare it (same names, see
   * `topologyNames`); the delay buckets must then match the declared delay queues. Default is `true`.
   */
  readonly declare?: boolean;
}

/** Options of `rabbitmqConsumer`. */
export interface RabbitmqConsumerOptions {
  /**
   * Opens a new connection (e.g. `() => amqp.connect(url)`): called at start and after the connection is
   * lost, so the consumer can recover from a broker restart. The consumer closes connections it opened.
   * Give this or `connection`.
   */
  readonly connect?: () => Promise<AmqpConnection>;
  /**
   * A connection the application owns and closes. After a channel error the consumer opens a new channel on
   * it; after the connection itself is lost it can only recover if the connection reconnects by itself
   * (amqplib's `recovery` option). Prefer `connect`.
   */
  readonly connection?: AmqpConnection;
  /** The work queue to consume. */
  readonly queue: string;
  /** The idempotent consumer (`idempotentConsumer(...)` from `@inboxkit/core`). */
  readonly handler: RabbitmqConsumerHandler;
  /** Handlers (or batches, see `maxBatchSize`) running at once. Default is 1. */
  readonly concurrency?: number;
  /**
   * Most messages handled together in one inbox transaction (`handleBatch`: one commit for the batch, each
   * message isolated by a savepoint). A batch forms only from messages already waiting, so it adds no delay;
   * redelivered messages are always handled alone, so a message that crashes the process takes no batch down
   * with it, again and again. Default is 1 (no batching).
   */
  readonly maxBatchSize?: number;
  /**
   * Unacked messages the broker may push (basic.qos). Default is `concurrency × maxBatchSize`: every unacked
   * message is being handled (or batched). A larger prefetch buffers messages; a crash then returns the
   * buffered ones too, and a quorum queue counts a delivery for each (`x-delivery-count`). That costs them no
   * attempt (inboxkit counts attempts in the inbox, not from the broker's count), but it brings them closer to
   * the queue's `x-delivery-limit` backstop.
   */
  readonly prefetch?: number;
  /** Finds the id when no `messageId` property or `message-id` / `ce-id` header is set. Default: none. */
  readonly messageId?: (message: AmqpMessage) => string | undefined;
  /**
   * Use `sha256:<hex of body>` as the id when nothing else gives one. It catches redeliveries but not a
   * producer resending the same intent with a different body (e.g. a new timestamp). Default is `false`:
   * such messages are dead-lettered with reason `missing-id`.
   */
  readonly contentIdFallback?: boolean;
  /** Larger bodies are dead-lettered with reason `oversize` without running the handler. Default is 1 MiB. */
  readonly maxMessageBytes?: number;
  /** How long `stop()` waits for running handlers before closing the channel. Default is 30,000 ms. */
  readonly closeTimeoutMs?: number;
  /** How long to wait for the broker's confirm of a retry or DLQ copy. Default is 30,000 ms. */
  readonly confirmTimeoutMs?: number;
  /**
   * Backoff between connection attempts, at start and after a lost connection (×2 per attempt, with jitter).
   * Default is 500 ms up to 30,000 ms.
   */
  readonly reconnect?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  /**
   * How long `start()` keeps trying to reach the broker (refused or reset connections, timeouts, a node still
   * booting) before it rejects with a `StartTimeoutError`. Failures no retry fixes (login or permissions
   * refused, a queue declared with other arguments) reject at once whatever this is. Default is `Infinity`:
   * like the reconnect after start, which never gives up, start waits for the broker (as Spring AMQP and
   * MassTransit consumers do); a deploy that cannot reach it stays unready and logs a warning per attempt.
   */
  readonly startTimeoutMs?: number;
  /** Topology settings; the queue type and delivery limit, the delay buckets, bindings. Default: declare a quorum topology. */
  readonly topology?: RabbitmqTopologySettings;
  /** Default is the handler's logger, else silent. */
  readonly logger?: Logger;
}

/** The validated, defaulted options. */
export interface ResolvedConsumerOptions {
  readonly connect: (() => Promise<AmqpConnection>) | undefined;
  readonly connection: AmqpConnection | undefined;
  readonly handler: RabbitmqConsumerHandler;
  readonly concurrency: number;
  readonly maxBatchSize: number;
  readonly prefetch: number;
  readonly messageId: ((message: AmqpMessage) => string | undefined) | undefined;
  readonly contentIdFallback: boolean;
  readonly maxMessageBytes: number;
  readonly closeTimeoutMs: number;
  readonly confirmTimeoutMs: number;
  readonly reconnectInitialDelayMs: number;
  readonly reconnectMaxDelayMs: number;
  readonly startTimeoutMs: number;
  readonly declare: boolean;
  readonly topology: DeclaredTopology;
  readonly logger: Logger;
}

const check = optionChecks('rabbitmqConsumer');

/** Validates `options` once and fills in every default. Throws `ConfigurationError` saying what to change. */
export function resolveConsumerOptions(options: RabbitmqConsumerOptions): ResolvedConsumerOptions {
  if (!options || typeof options !== 'object')
    throw new ConfigurationError('rabbitmqConsumer: options are required');
  const { connect, connection, handler } = options;
  if ((connect === undefined) === (connection === undefined)) {
    throw new ConfigurationError(
      'rabbitmqConsumer: give exactly one of `connect` (a function opening a connection; needed to reconnect) or `connection`',
    );
  }
  if (connect !== undefined && typeof connect !== 'function') {
    throw new ConfigurationError(
      'rabbitmqConsumer: `connect` must be a function returning a Promise of an amqplib connection',
    );
  }
  if (connection !== undefined && typeof connection.createConfirmChannel !== 'function') {
    throw new ConfigurationError(
      'rabbitmqConsumer: `connection` must be an amqplib connection (amqp.connect(url))',
    );
  }
  check.handler(handler);
  const concurrency = check.integer('concurrency', options.concurrency, 1, { max: 65_535 });
  const maxBatchSize = check.integer('maxBatchSize', options.maxBatchSize, 1, { max: 1_000 });
  const fullBatches = Math.min(65_535, concurrency * maxBatchSize);
  const prefetch = check.integer('prefetch', options.prefetch, fullBatches, { max: 65_535 });
  if (prefetch < concurrency) {
    throw new ConfigurationError(
      `rabbitmqConsumer: \`prefetch\` (${prefetch}) is below \`concurrency\` (${concurrency}), so handlers would idle; raise prefetch or lower concurrency`,
    );
  }
  if (options.messageId !== undefined && typeof options.messageId !== 'function') {
    throw new ConfigurationError(
      'rabbitmqConsumer: `messageId` must be a function (message) => string | undefined',
    );
  }
  const maxMessageBytes = options.maxMessageBytes ?? 1024 * 1024;
  if (maxMessageBytes !== Infinity) check.integer('maxMessageBytes', maxMessageBytes, 0);
  const reconnect = check.backoff('reconnect', options.reconnect);
  const { declare, ...topologyOptions } = options.topology ?? {};
  const maxAttempts = handler.config?.maxAttempts ?? 5;
  let topology: DeclaredTopology;
  try {
    topology = resolveTopology({ ...topologyOptions, queue: options.queue, maxAttempts });
  } catch (err) {
    throw new ConfigurationError(`rabbitmqConsumer: ${(err as Error).message}`, { cause: err });
  }
  return Object.freeze({
    connect,
    connection,
    handler,
    concurrency,
    maxBatchSize,
    prefetch,
    messageId: options.messageId,
    contentIdFallback: options.contentIdFallback === true,
    maxMessageBytes,
    closeTimeoutMs: check.positiveMs('closeTimeoutMs', options.closeTimeoutMs, 30_000),
    confirmTimeoutMs: check.positiveMs('confirmTimeoutMs', options.confirmTimeoutMs, 30_000),
    reconnectInitialDelayMs: reconnect.initialDelayMs,
    reconnectMaxDelayMs: reconnect.maxDelayMs,
    startTimeoutMs: check.positiveMs('startTimeoutMs', options.startTimeoutMs, Infinity),
    declare: declare !== false,
    topology,
    logger: transportLogger(options.logger, handler),
  });
}
