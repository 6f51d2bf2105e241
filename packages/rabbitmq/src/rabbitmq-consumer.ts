// The RabbitMQ transport consumer: manual acks sent only after the outcome is durable (effect committed,
// or the retry / dead-letter copy confirmed by the broker), bounded concurrency, and recovery from lost
// channels and connections. A delivery is settled only on the channel that delivered it: when that channel
// died, its acks are dropped and the broker redelivers the message, which the inbox then absorbs.

import {
  abortableSleep,
  ConfigurationError,
  DeliveryKit,
  DeliveryScheduler,
  retryStart,
  settledWithin,
  startRetryDelay,
} from '@inboxkit/core';
import type { GuardedOutcome, Outcome, TransportConsumer } from '@inboxkit/core';
import type { AmqpConnection, AmqpMessage } from './amqp-types.js';
import { AckCoalescer } from './ack-coalescer.js';
import { resolveConsumerOptions } from './consumer-options.js';
import type { RabbitmqConsumerOptions, ResolvedConsumerOptions } from './consumer-options.js';
import { declareTopology } from './declare-topology.js';
import { toInboundMessage } from './inbound-message.js';
import { RabbitmqSettlement } from './rabbitmq-settlement.js';
import type { Delivery, Item, Session } from './rabbitmq-settlement.js';
import { startFailure } from './start-retry.js';

export type {
  RabbitmqConsumerHandler,
  RabbitmqConsumerOptions,
  RabbitmqTopologySettings,
} from './consumer-options.js';

function errorInfo(err: unknown): { err: { name: string; message: string; code?: unknown } } {
  if (err instanceof Error) {
    return { err: { name: err.name, message: err.message, code: (err as { code?: unknown }).code } };
  }
  return { err: { name: 'Error', message: typeof err === 'string' ? err : JSON.stringify(err) } };
}

class RabbitmqConsumer implements TransportConsumer {
  readonly #o: ResolvedConsumerOptions;
  #state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  readonly #stopSignal = new AbortController();
  #stopping: Promise<void> | undefined;

  /** The connection this consumer opened through `connect` (and will close), while it is open. */
  #ownConnection: AmqpConnection | undefined;
  #session: Session | undefined;
  #reconnecting: Promise<void> | undefined;

  /** Core's scheduler of pushed deliveries: `concurrency` at once, a redelivery alone (see the constructor). */
  readonly #scheduler: DeliveryScheduler<Delivery>;
  /** RabbitMQ's settlement verbs, driven by core's `settle()`. */
  readonly #port: RabbitmqSettlement;
  /** Core's delivery kit over those verbs: guarded handle, attempt charger, settle. */
  readonly #kit: DeliveryKit<Item>;

  constructor(options: ResolvedConsumerOptions) {
    this.#o = options;
    this.#port = new RabbitmqSettlement(options, this.#stopSignal.signal);
    this.#kit = new DeliveryKit<Item>({
      consumer: options.handler,
      port: this.#port,
      // A retry goes through the delay queue as a fresh copy carrying its attempt count: redelivering costs the
      // broker's delivery limit nothing, so a store outage's retry is settled like any other.
      features: { redeliverSpendsCount: false },
      running: () => this.#state === 'running',
      sleep: (ms) => abortableSleep(ms, this.#stopSignal.signal),
      message: (item) => item.inbound,
      // The redelivered flag is set only after a channel closed holding the message (a crash, a lost
      // connection, a broker restart): a retry comes back unflagged from the delay queue, so every flagged one
      // is a suspect.
      mayHaveCrashed: redelivered,
      logger: options.logger,
      what: 'rabbitmq consumer',
      context: { queue: options.topology.queue },
      deliveryContext: (item) => ({ messageId: item.inbound.id }),
    });
    // A redelivery may have crashed a process: it runs alone and is charged a started attempt first
    // (`AttemptCharger`), so a crash charges at most the one running. Redeliveries follow crashes, broker
    // restarts and lost connections only: the steady state is not slowed. Fresh deliveries already waiting on
    // the same channel join a batch.
    this.#scheduler = new DeliveryScheduler<Delivery>({
      concurrency: options.concurrency,
      running: () => this.#state === 'running',
      run: (batch) => (batch.length === 1 ? this.#process(batch[0]!) : this.#processBatch(batch)),
      alone: redelivered,
      // A dead channel's deliveries are redelivered by the broker; don't start them.
      stale: (delivery) => !delivery.session.alive,
      maxBatch: options.maxBatchSize,
      joins: (first, next) => next.session === first.session,
    });
  }

  /**
   * Connects, declares the topology and subscribes. While the broker cannot be reached, keeps trying with the
   * `reconnect` backoff (each failure logged at warn with the next delay) until `startTimeoutMs`; rejects at
   * once with a ConfigurationError on what retrying cannot fix. Resolves without starting when `stop()` is
   * called first.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new ConfigurationError('rabbitmqConsumer: start() may be called once');
    this.#state = 'running';
    const o = this.#o;
    let started: { readonly value: void } | undefined;
    try {
      started = await retryStart({
        attempt: () => this.#openSession(),
        permanent: (err) => startFailure(err, o.topology.queue),
        delayMs: (attempt) => startRetryDelay(attempt, o.reconnectInitialDelayMs, o.reconnectMaxDelayMs),
        timeoutMs: o.startTimeoutMs,
        signal: this.#stopSignal.signal,
        // An attempt left running finds the consumer no longer running and closes what it opened.
        abandon: (attempt) => void attempt.finally(() => this.#closeOwnConnection()).catch(() => undefined),
        logger: o.logger,
        what: 'rabbitmq consumer',
        context: { queue: o.topology.queue },
      });
    } catch (err) {
      this.#state = 'stopped';
      this.#stopSignal.abort();
      await this.#closeOwnConnection();
      throw err;
    }
    if (started === undefined) return; // stop() was called; it closes what is open.
    o.logger.info(
      { queue: o.topology.queue, prefetch: o.prefetch, concurrency: o.concurrency },
      'rabbitmq consumer started',
    );
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    if (this.#state === 'idle' || this.#state === 'stopped') {
      this.#state = 'stopped';
      return;
    }
    this.#state = 'stopping';
    this.#stopSignal.abort();
    const session = this.#session;
    if (session?.alive && session.consumerTag !== undefined) {
      try {
        await session.channel.cancel(session.consumerTag);
      } catch (err) {
        this.#o.logger.debug(errorInfo(err), 'rabbitmq consumer: cancel failed');
      }
    }
    // Deliveries not started yet are returned to the queue when the channel closes.
    this.#scheduler.stop();
    await this.#drain(this.#o.closeTimeoutMs);
    if (this.#reconnecting) await this.#reconnecting;
    if (this.#session) await this.#closeSession(this.#session);
    await this.#closeOwnConnection();
    this.#state = 'stopped';
    this.#o.logger.info({ queue: this.#o.topology.queue }, 'rabbitmq consumer stopped');
  }

  /** Waits for running handlers (and their acks) up to `timeoutMs`. */
  async #drain(timeoutMs: number): Promise<void> {
    if (!(await settledWithin(this.#scheduler.idle(), timeoutMs))) {
      this.#o.logger.warn(
        { running: this.#scheduler.running, closeTimeoutMs: timeoutMs },
        'rabbitmq consumer: handlers still running at close timeout; their messages will be redelivered',
      );
    }
  }

  // ---- connection and channel lifecycle ----

  async #connection(): Promise<AmqpConnection> {
    if (this.#o.connection) return this.#o.connection;
    if (this.#ownConnection) return this.#ownConnection;
    const connection = await this.#o.connect!();
    const onError = (err: Error): void => this.#o.logger.warn(errorInfo(err), 'rabbitmq connection error');
    const onClose = (): void => {
      connection.removeListener('close', onClose);
      if (this.#ownConnection === connection) this.#ownConnection = undefined;
      // Channels emit 'close' too; this covers a connection lost while no channel is open.
      if (this.#session?.connection === connection)
        this.#sessionLost(this.#session, new Error('connection closed'));
    };
    connection.on('error', onError);
    connection.on('close', onClose);
    if (this.#state !== 'running') {
      await connection.close().catch(() => undefined);
      throw new Error('rabbitmq consumer stopped while connecting');
    }
    this.#ownConnection = connection;
    return connection;
  }

  async #openSession(): Promise<void> {
    const connection = await this.#connection();
    const channel = await connection.createConfirmChannel();
    const acks = new AckCoalescer(channel, (err) =>
      this.#o.logger.debug(errorInfo(err), 'rabbitmq consumer: ack on a closing channel dropped'),
    );
    const session: Session = { connection, channel, acks, consumerTag: undefined, alive: true, ready: false };
    channel.on('error', (err: Error) => this.#o.logger.warn(errorInfo(err), 'rabbitmq channel error'));
    channel.on('close', () => this.#sessionLost(session, new Error('channel closed')));
    try {
      if (this.#o.declare)
        await declareTopology(channel, {
          ...this.#o.topology,
          maxAttempts: this.#o.handler.config.maxAttempts,
        });
      await channel.prefetch(this.#o.prefetch);
      if (this.#state !== 'running') throw new Error('rabbitmq consumer stopped while subscribing');
      const { consumerTag } = await channel.consume(
        this.#o.topology.queue,
        (m) => this.#onDelivery(session, m),
        { noAck: false },
      );
      session.consumerTag = consumerTag;
      if (!session.alive) throw new Error('channel closed while subscribing');
      if (this.#state !== 'running') throw new Error('rabbitmq consumer stopped while subscribing');
    } catch (err) {
      await this.#closeSession(session);
      throw err;
    }
    session.ready = true;
    this.#session = session;
  }

  #sessionLost(session: Session, reason: Error): void {
    if (!session.alive) return;
    session.alive = false;
    session.acks.close();
    if (!session.ready || this.#state !== 'running') return;
    this.#o.logger.warn(
      { queue: this.#o.topology.queue, reason: reason.message, running: this.#scheduler.running },
      'rabbitmq consumer lost its channel; reconnecting (unsettled messages will be redelivered)',
    );
    this.#reconnecting ??= this.#reconnect().finally(() => {
      this.#reconnecting = undefined;
    });
  }

  async #reconnect(): Promise<void> {
    const lost = this.#session;
    if (lost) await this.#closeSession(lost);
    for (let attempt = 0; this.#state === 'running'; attempt++) {
      await abortableSleep(
        startRetryDelay(attempt, this.#o.reconnectInitialDelayMs, this.#o.reconnectMaxDelayMs),
        this.#stopSignal.signal,
      );
      if (this.#state !== 'running') return;
      try {
        await this.#openSession();
        this.#o.logger.info(
          { queue: this.#o.topology.queue, attempt: attempt + 1 },
          'rabbitmq consumer reconnected',
        );
        return;
      } catch (err) {
        this.#o.logger.warn(
          { ...errorInfo(err), attempt: attempt + 1 },
          'rabbitmq consumer: reconnect failed; retrying',
        );
      }
    }
  }

  async #closeSession(session: Session): Promise<void> {
    // Acks requested but not sent yet go out before the channel closes (closing would requeue those messages).
    if (session.alive) session.acks.flush();
    session.alive = false;
    session.acks.close();
    try {
      await session.channel.close();
    } catch {
      // Already closed, or the connection is gone: either way the broker returns its unacked messages.
    }
  }

  async #closeOwnConnection(): Promise<void> {
    const connection = this.#ownConnection;
    this.#ownConnection = undefined;
    if (!connection) return;
    try {
      await connection.close();
    } catch {
      // Already closed.
    }
  }

  // ---- deliveries ----

  #onDelivery(session: Session, message: AmqpMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (queue deleted, or a quorum leader moved): resubscribe.
      // The reconnect closes this channel, returning its unacked messages.
      this.#sessionLost(session, new Error('consumer cancelled by the broker'));
      return;
    }
    session.acks.delivered(message);
    this.#scheduler.push({ session, message });
  }

  /** One delivery: charged when redelivered (see the scheduler), handled, settled through core's `settle()`. */
  async #process(delivery: Delivery): Promise<void> {
    let item: Item;
    try {
      item = { ...delivery, inbound: toInboundMessage(delivery.message, this.#o.topology.queue, this.#o) };
    } catch (err) {
      // Not a message's fault (only a user's messageId function throws here): leave it; it is redelivered.
      this.#o.logger.error(errorInfo(err), 'rabbitmq consumer: unexpected failure; requeueing');
      this.#port.requeue(delivery);
      return;
    }
    await this.#kit.settle(item, this.#oversize(item) ?? (await this.#kit.handle(item)));
  }

  /** Fresh deliveries of one channel, claimed and applied in one inbox transaction, then settled one by one. */
  async #processBatch(batch: readonly Delivery[]): Promise<void> {
    let items: Item[];
    try {
      items = batch.map((d) => ({
        ...d,
        inbound: toInboundMessage(d.message, this.#o.topology.queue, this.#o),
      }));
    } catch (err) {
      this.#o.logger.error(
        { ...errorInfo(err), size: batch.length },
        'rabbitmq consumer: unexpected batch failure; requeueing',
      );
      for (const d of batch) this.#port.requeue(d);
      return;
    }
    const outcomes = new Map<Item, GuardedOutcome>();
    const toHandle = items.filter((item) => {
      const oversize = this.#oversize(item);
      if (oversize) outcomes.set(item, oversize);
      return oversize === undefined;
    });
    const handled = await this.#kit.handleBatch(toHandle);
    toHandle.forEach((item, k) => outcomes.set(item, handled[k]!));
    await Promise.all([...outcomes].map(([item, outcome]) => this.#kit.settle(item, outcome)));
  }

  #oversize({ message, inbound }: Item): Outcome | undefined {
    if (message.content.length <= this.#o.maxMessageBytes) return undefined;
    return {
      status: 'dead-letter',
      messageId: inbound.id,
      reason: 'oversize',
      attempts: 0,
      error: {
        name: 'OversizeMessage',
        message: `body of ${message.content.length} bytes exceeds maxMessageBytes (${this.#o.maxMessageBytes})`,
      },
    };
  }
}

/** May this delivery have crashed a process: the broker redelivers what a closed channel held. */
function redelivered(delivery: Delivery): boolean {
  return delivery.message.fields.redelivered;
}

/**
 * Consumes `queue` and feeds every delivery to an idempotent consumer, acking only once the outcome is
 * durable: `processed`/`duplicate` → ack; `retry` → a copy to the delay queue (confirmed), then ack (delay 0:
 * nack with requeue); `dead-letter` → a copy with the DLQ headers to `<queue>.dlx` (confirmed), then ack.
 * Reconnects with backoff when the channel or connection is lost and declares the topology again.
 * Options are validated here (`ConfigurationError`); broker-side problems surface from `start()`.
 *
 * @example
 * const consumer = rabbitmqConsumer({
 *   connect: () => amqp.connect(process.env.AMQP_URL!),
 *   queue: 'orders',
 *   handler: idempotentConsumer({ name: 'orders', store, handler: applyOrder }),
 *   concurrency: 8,
 * });
 * await consumer.start();
 * process.on('SIGTERM', () => void consumer.stop());
 */
export function rabbitmqConsumer(options: RabbitmqConsumerOptions): TransportConsumer {
  return new RabbitmqConsumer(resolveConsumerOptions(options));
}
