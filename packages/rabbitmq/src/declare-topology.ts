// The queues and exchange one inboxkit RabbitMQ consumer needs: the work queue (quorum by default, with a
// broker delivery limit as the crash-loop backstop), one delay queue per delay bucket that dead-letters back
// to the work queue, and a dead-letter exchange with its DLQ. Idempotent: declaring twice changes nothing.

import {
  backstopLimit,
  ConfigurationError,
  isBackstop,
  optionChecks,
  retryStart,
  silentLogger,
  startRetryDelay,
} from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import type { AmqpChannel, AmqpConnection } from './amqp-types.js';
import { startFailure } from './start-retry.js';
import { fitsShortString } from './short-string.js';

/**
 * Delay buckets, in ms: a retry waits in the smallest bucket at least as long as the requested delay (the
 * largest for longer delays; the inbox then holds the message back again for the rest).
 */
export const DEFAULT_DELAY_BUCKETS_MS: readonly number[] = Object.freeze([
  250, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000,
]);

/** The work queue's default `x-delivery-limit`. */
export const DEFAULT_DELIVERY_LIMIT = 20;

/** The names of everything `declareTopology` declares for `queue`. */
export interface TopologyNames {
  /** The work queue the consumer reads. */
  readonly queue: string;
  /** Direct exchange that the work queue (broker delivery limit) and the consumer dead-letter to: `<queue>.dlx`. */
  readonly deadLetterExchange: string;
  /** Routing key of dead letters on `deadLetterExchange`: the work queue's name. */
  readonly deadLetterRoutingKey: string;
  /** The DLQ, bound to `deadLetterExchange`: `<queue>.dlq` unless named otherwise (`deadLetterQueue`). */
  readonly deadLetterQueue: string;
  /** The delay queue of one bucket: `<queue>.retry.<ms>`. */
  delayQueue(bucketMs: number): string;
}

/**
 * Names of the topology of `queue`; `options.deadLetterQueue` names the DLQ (default `<queue>.dlq`).
 *
 * @example
 * topologyNames('orders').deadLetterQueue; // 'orders.dlq'
 * topologyNames('orders', { deadLetterQueue: 'all.dlq' }).deadLetterQueue; // 'all.dlq'
 */
export function topologyNames(
  queue: string,
  options: { readonly deadLetterQueue?: string | undefined } = {},
): TopologyNames {
  return Object.freeze({
    queue,
    deadLetterExchange: `${queue}.dlx`,
    deadLetterRoutingKey: queue,
    deadLetterQueue: options.deadLetterQueue ?? `${queue}.dlq`,
    delayQueue: (bucketMs: number) => `${queue}.retry.${bucketMs}`,
  });
}

/** What `declareTopology` declares. */
export interface TopologyOptions {
  /** The work queue's name. */
  readonly queue: string;
  /**
   * `quorum`: replicated, enforces `x-delivery-limit` (a backstop above maxAttempts) and dead-letters at least
   * once. `classic`: no delivery limit, and dead-lettering from the delay queues is at most once. Crash loops
   * rely on the inbox's durable count on both. Default is `quorum`.
   */
  readonly queueType?: 'quorum' | 'classic';
  /** The consumer's `maxAttempts`; the default delivery limit sits above it. Default is 5. */
  readonly maxAttempts?: number;
  /**
   * The broker's delivery limit of the work queue (quorum only): a message returned more often than this (a
   * process that crashes on it) is dead-lettered by the broker. Must exceed `maxAttempts`. Default is 20
   * (RabbitMQ 4's own default), or `maxAttempts + 5` when that is larger: a fixed value, because RabbitMQ
   * refuses to redeclare a queue with another limit, so tuning `maxAttempts` must not change it.
   */
  readonly deliveryLimit?: number;
  /** Delay buckets in ms, one delay queue each. Default is `DEFAULT_DELAY_BUCKETS_MS` (250 ms … 5 min). */
  readonly delayBucketsMs?: readonly number[];
  /** Bindings of the work queue to existing exchanges. Default is none. */
  readonly bindings?: readonly { readonly exchange: string; readonly routingKey: string }[];
  /**
   * The DLQ's name. It is bound to `<queue>.dlx` with routing key `<queue>`, so several work queues may name
   * the same DLQ (declared with the type of the first that declares it). Default is `<queue>.dlq`.
   *
   * @example
   * await declareTopology(channel, { queue: 'orders', deadLetterQueue: 'shop.dlq' });
   */
  readonly deadLetterQueue?: string;
}

/** The resolved topology: names plus the settings in force. */
export interface DeclaredTopology extends TopologyNames {
  readonly queueType: 'quorum' | 'classic';
  readonly deliveryLimit: number | undefined;
  readonly delayBucketsMs: readonly number[];
}

/** Validates `options` and fills in defaults, without touching the broker. Throws `ConfigurationError`. */
export function resolveTopology(options: TopologyOptions): DeclaredTopology {
  const queue = options.queue;
  if (typeof queue !== 'string' || queue.length === 0 || queue.length > 200) {
    throw new ConfigurationError('topology: `queue` must be a queue name of 1–200 characters');
  }
  const queueType = options.queueType ?? 'quorum';
  if (queueType !== 'quorum' && queueType !== 'classic') {
    throw new ConfigurationError(
      `topology: \`queueType\` must be 'quorum' or 'classic', got ${String(queueType)}`,
    );
  }
  const maxAttempts = options.maxAttempts ?? 5;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new ConfigurationError(`topology: \`maxAttempts\` must be a positive integer, got ${maxAttempts}`);
  }
  let deliveryLimit: number | undefined;
  if (queueType === 'quorum') {
    deliveryLimit =
      options.deliveryLimit ?? backstopLimit(maxAttempts, { headroom: 5, floor: DEFAULT_DELIVERY_LIMIT });
    if (!isBackstop(deliveryLimit, maxAttempts)) {
      throw new ConfigurationError(
        `topology: \`deliveryLimit\` (${deliveryLimit}) must be an integer above maxAttempts (${maxAttempts}), ` +
          'or the broker dead-letters messages the inbox would still retry; raise deliveryLimit',
      );
    }
  } else if (options.deliveryLimit !== undefined) {
    throw new ConfigurationError(
      'topology: `deliveryLimit` needs a quorum queue; classic queues keep no delivery count',
    );
  }
  const buckets = [...(options.delayBucketsMs ?? DEFAULT_DELAY_BUCKETS_MS)].sort((a, b) => a - b);
  if (buckets.length === 0 || buckets.some((b) => !Number.isInteger(b) || b < 1 || b > 2 ** 31 - 1)) {
    throw new ConfigurationError(
      'topology: `delayBucketsMs` must hold at least one positive integer number of ms',
    );
  }
  for (const binding of options.bindings ?? []) {
    if (
      typeof binding.exchange !== 'string' ||
      binding.exchange === '' ||
      typeof binding.routingKey !== 'string'
    ) {
      throw new ConfigurationError(
        'topology: each binding needs a non-empty `exchange` and a `routingKey` string',
      );
    }
  }
  const names = topologyNames(queue, { deadLetterQueue: options.deadLetterQueue });
  const dlq = names.deadLetterQueue;
  const delayQueues = new Set(buckets.map((b) => names.delayQueue(b)));
  if (
    typeof dlq !== 'string' ||
    dlq.length === 0 ||
    !fitsShortString(dlq) ||
    dlq.startsWith('amq.') ||
    dlq === queue ||
    delayQueues.has(dlq)
  ) {
    throw new ConfigurationError(
      `topology: \`deadLetterQueue\` must be a queue name of 1–255 bytes, not starting with 'amq.' (reserved ` +
        `by RabbitMQ) and other than the work queue and its delay queues; got ${JSON.stringify(String(dlq).slice(0, 80))}`,
    );
  }
  return Object.freeze({
    ...names,
    queueType,
    deliveryLimit,
    delayBucketsMs: Object.freeze([...new Set(buckets)]),
  });
}

/** The smallest bucket holding a message at least `delayMs`, or the largest bucket. */
export function delayBucketFor(buckets: readonly number[], delayMs: number): number {
  for (const bucket of buckets) if (bucket >= delayMs) return bucket;
  return buckets[buckets.length - 1]!;
}

function queueArguments(type: 'quorum' | 'classic'): Record<string, unknown> {
  return type === 'quorum'
    ? { 'x-queue-type': 'quorum', 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' }
    : { 'x-queue-type': 'classic' };
}

/** How `declareTopology` waits for a broker that is down or restarting (only when given `connect`). */
export interface DeclareTopologyRetryOptions {
  /**
   * How long to keep trying while the broker cannot be reached before rejecting with a `StartTimeoutError`.
   * Default is `Infinity`, as the consumer's `startTimeoutMs`.
   */
  readonly startTimeoutMs?: number;
  /** Backoff between attempts (×2 per attempt, with jitter). Default is 500 ms up to 30,000 ms. */
  readonly reconnect?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  /** Receives a warning per failed attempt. Default is silent. */
  readonly logger?: Logger;
  /** Aborting it ends the wait: the call rejects with the signal's reason. Default is none. */
  readonly signal?: AbortSignal;
}

/**
 * Declares the work queue, the delay queues, the dead-letter exchange and the DLQ, and binds the work queue
 * to `bindings`. Safe to call on every start. Fails when a queue already exists with other arguments
 * (RabbitMQ cannot change a queue's arguments; use a policy or delete the queue).
 *
 * Given a `channel`, it declares on it once (and amqplib closes the channel on a failure). Given `connect`
 * (e.g. `() => amqp.connect(url)`), it opens a connection, declares, and closes the connection again; while
 * the broker cannot be reached it keeps trying as the consumer's `start()` does (`retry`; default without a
 * time limit), so a process started during a broker restart waits instead of dying. What retrying cannot fix
 * (other queue arguments, a refused login or permission) rejects at once with a `ConfigurationError`.
 *
 * @example
 * await declareTopology(() => amqp.connect(url), { queue: 'orders', maxAttempts: 5 }, { logger });
 * // or, on a channel of your own:
 * const channel = await connection.createChannel();
 * await declareTopology(channel, { queue: 'orders', maxAttempts: 5 });
 * await channel.close();
 */
export async function declareTopology(
  target: AmqpChannel | (() => Promise<AmqpConnection>),
  options: TopologyOptions,
  retry: DeclareTopologyRetryOptions = {},
): Promise<DeclaredTopology> {
  const topology = resolveTopology(options);
  if (typeof target !== 'function') return declareOn(target, topology, options);
  const connect = target;
  const check = optionChecks('declareTopology');
  const backoff = check.backoff('reconnect', retry.reconnect);
  const signal = retry.signal ?? new AbortController().signal;
  const declared = await retryStart({
    attempt: async () => {
      const connection = await connect();
      // A connection the broker closes while we declare must not crash the process through 'error'.
      const ignore = (): void => undefined;
      connection.on('error', ignore);
      try {
        const channel = await connection.createChannel();
        channel.on('error', ignore);
        return await declareOn(channel, topology, options);
      } finally {
        await connection.close().catch(() => undefined);
      }
    },
    permanent: (err) => startFailure(err, topology.queue),
    delayMs: (n) => startRetryDelay(n, backoff.initialDelayMs, backoff.maxDelayMs),
    timeoutMs: check.positiveMs('startTimeoutMs', retry.startTimeoutMs, Infinity),
    signal,
    abandon: (attempt) => void attempt.catch(() => undefined),
    logger: retry.logger ?? silentLogger,
    what: 'declareTopology',
    context: { queue: topology.queue },
  });
  if (declared === undefined) throw signal.reason ?? new Error('declareTopology: aborted');
  return declared.value;
}

async function declareOn(
  channel: AmqpChannel,
  topology: DeclaredTopology,
  options: TopologyOptions,
): Promise<DeclaredTopology> {
  const args = queueArguments(topology.queueType);
  await channel.assertExchange(topology.deadLetterExchange, 'direct', { durable: true });
  await channel.assertQueue(topology.deadLetterQueue, {
    durable: true,
    arguments: { 'x-queue-type': topology.queueType },
  });
  await channel.bindQueue(
    topology.deadLetterQueue,
    topology.deadLetterExchange,
    topology.deadLetterRoutingKey,
  );
  await channel.assertQueue(topology.queue, {
    durable: true,
    arguments: {
      ...args,
      ...(topology.deliveryLimit !== undefined ? { 'x-delivery-limit': topology.deliveryLimit } : {}),
      'x-dead-letter-exchange': topology.deadLetterExchange,
      'x-dead-letter-routing-key': topology.deadLetterRoutingKey,
    },
  });
  for (const bucket of topology.delayBucketsMs) {
    // One TTL per queue: messages expire in arrival order, so no long delay holds back a short one.
    await channel.assertQueue(topology.delayQueue(bucket), {
      durable: true,
      arguments: {
        ...args,
        'x-message-ttl': bucket,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': topology.queue,
      },
    });
  }
  for (const binding of options.bindings ?? []) {
    await channel.bindQueue(topology.queue, binding.exchange, binding.routingKey);
  }
  return topology;
}
