// The RabbitMQ transport consumer: manual acks sent only after the outcome is durable (effect committed,
// or the retry / dead-letter copy confirmed by the broker), bounded concurrency, and recovery from lost
// channels and connections. A delivery is settled only on the channel that delivered it: when that channel
// died, its acks are dropped and the broker redelivers the message, which the inbox then absorbs.

import {
  abortableSleep,
  ConfigurationError,
  DEAD_LETTER_FORMS,
  isInboxkitError,
  MessageTooLargeError,
  retryStart,
  sendInFittingForm,
  startRetryDelay,
  toErrorInfo,
} from '@inboxkit/core';
import type {
  DeadLetterOutcome,
  InboundMessage,
  Outcome,
  RetryOutcome,
  TransportConsumer,
} from '@inboxkit/core';
import type { AmqpConfirmChannel, AmqpConnection, AmqpMessage } from './amqp-types.js';
import { AckCoalescer } from './ack-coalescer.js';
import { confirmPublish } from './confirm-publish.js';
import type { RawPublish } from './confirm-publish.js';
import { resolveConsumerOptions } from './consumer-options.js';
import type { RabbitmqConsumerOptions, ResolvedConsumerOptions } from './consumer-options.js';
import { declareTopology } from './declare-topology.js';
import { toInboundMessage } from './inbound-message.js';
import { deadLetterCopies, retryCopy } from './settlement-copies.js';
import { startFailure } from './start-failure.js';

export type {
  RabbitmqConsumerHandler,
  RabbitmqConsumerOptions,
  RabbitmqTopologySettings,
} from './consumer-options.js';
export { startFailure } from './start-failure.js';

/** One channel's life: deliveries are settled on the channel that delivered them, or not at all. */
interface Session {
  readonly connection: AmqpConnection;
  readonly channel: AmqpConfirmChannel;
  /** The channel's acks, coalesced per turn of the event loop. */
  readonly acks: AckCoalescer;
  consumerTag: string | undefined;
  alive: boolean;
  /** Set once consuming: from then on a close triggers a reconnect. */
  ready: boolean;
}

interface Delivery {
  readonly session: Session;
  readonly message: AmqpMessage;
}

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

  readonly #pending: Delivery[] = [];
  readonly #running = new Set<Promise<void>>();
  /** The redelivery running alone, if one is (see `#pump`). */
  #alone: Promise<void> | undefined;
  /** Copies of each message id being handled in this process right now (see `#recordAttemptStarted`). */
  readonly #inFlight = new Map<string, number>();

  constructor(options: ResolvedConsumerOptions) {
    this.#o = options;
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
    this.#pending.length = 0;
    await this.#drain(this.#o.closeTimeoutMs);
    if (this.#reconnecting) await this.#reconnecting;
    if (this.#session) await this.#closeSession(this.#session);
    await this.#closeOwnConnection();
    this.#state = 'stopped';
    this.#o.logger.info({ queue: this.#o.topology.queue }, 'rabbitmq consumer stopped');
  }

  /** Waits for running handlers (and their acks) up to `timeoutMs`. */
  async #drain(timeoutMs: number): Promise<void> {
    if (this.#running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.allSettled([...this.#running]), timeout]);
    clearTimeout(timer);
    if (this.#running.size > 0) {
      this.#o.logger.warn(
        { running: this.#running.size, closeTimeoutMs: timeoutMs },
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
      { queue: this.#o.topology.queue, reason: reason.message, running: this.#running.size },
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
    this.#pending.push({ session, message });
    this.#pump();
  }

  /**
   * Starts deliveries while handlers are free. A redelivery runs alone: it waits until every running handler
   * has finished, and nothing starts beside it until it settles. A redelivered message may have been running
   * when its process died, so it is charged a started attempt before it runs (`#recordAttemptStarted`); run
   * together, every redelivery running at the next crash would be charged again, and a process that dies
   * soon after each start (a crash loop elsewhere, a deploy gone wrong) would dead-letter healthy messages at
   * the head of the queue. Alone, a crash costs an attempt to one redelivery at most, and each of them runs to
   * its end before the next is charged. Redeliveries follow crashes, broker restarts and lost connections
   * only: the steady state is not slowed.
   */
  #pump(): void {
    while (
      this.#state === 'running' &&
      this.#alone === undefined &&
      this.#running.size < this.#o.concurrency &&
      this.#pending.length > 0
    ) {
      const first = this.#pending[0]!;
      // A dead channel's deliveries are redelivered by the broker; don't start them.
      if (!first.session.alive) {
        this.#pending.shift();
        continue;
      }
      if (first.message.fields.redelivered) {
        // Alone: once what runs now has finished (its end pumps again).
        if (this.#running.size > 0) return;
        this.#pending.shift();
        const run: Promise<void> = this.#process(first).finally(() => {
          this.#running.delete(run);
          this.#alone = undefined;
          this.#pump();
        });
        this.#alone = run;
        this.#running.add(run);
        return;
      }
      this.#pending.shift();
      const batch = [first];
      // Fresh deliveries already waiting join a batch (a redelivery never does: it runs alone).
      while (batch.length < this.#o.maxBatchSize && this.#pending.length > 0) {
        const next = this.#pending[0]!;
        if (next.session !== first.session || next.message.fields.redelivered) break;
        batch.push(this.#pending.shift()!);
      }
      const run: Promise<void> = (
        batch.length === 1 ? this.#process(first) : this.#processBatch(batch)
      ).finally(() => {
        this.#running.delete(run);
        this.#pump();
      });
      this.#running.add(run);
    }
  }

  #oversize(message: AmqpMessage, inbound: InboundMessage): Outcome | undefined {
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

  async #process({ session, message }: Delivery): Promise<void> {
    const o = this.#o;
    let inbound: InboundMessage | undefined;
    let release: (() => void) | undefined;
    try {
      inbound = toInboundMessage(message, o.topology.queue, o);
      let outcome = this.#oversize(message, inbound);
      if (outcome === undefined) {
        const copiesBefore = inbound.id === undefined ? 0 : (this.#inFlight.get(inbound.id) ?? 0);
        release = this.#hold([inbound.id]);
        // Another copy of the id already in hand here covers the attempt: one charge per id, not per copy.
        if (message.fields.redelivered && copiesBefore === 0) await this.#recordAttemptStarted(inbound);
        outcome = await o.handler.handle(inbound);
      }
      await this.#settle(session, message, inbound, outcome);
    } catch (err) {
      // Not a message's fault (handle() never rejects for that): leave it unacked; it is redelivered.
      o.logger.error(
        { ...errorInfo(err), messageId: inbound?.id },
        'rabbitmq consumer: unexpected failure; requeueing',
      );
      this.#nack(session, message);
    } finally {
      release?.();
    }
  }

  /** Marks `ids` in hand until the returned function is called. */
  #hold(ids: readonly (string | undefined)[]): () => void {
    const held = ids.filter((id): id is string => id !== undefined);
    for (const id of held) this.#inFlight.set(id, (this.#inFlight.get(id) ?? 0) + 1);
    return () => {
      for (const id of held) {
        const n = (this.#inFlight.get(id) ?? 1) - 1;
        if (n <= 0) this.#inFlight.delete(id);
        else this.#inFlight.set(id, n);
      }
    };
  }

  /** Fresh deliveries of one channel, claimed and applied in one inbox transaction, then settled one by one. */
  async #processBatch(batch: readonly Delivery[]): Promise<void> {
    const o = this.#o;
    let items: (Delivery & { readonly inbound: InboundMessage })[];
    try {
      items = batch.map((d) => ({ ...d, inbound: toInboundMessage(d.message, o.topology.queue, o) }));
    } catch (err) {
      o.logger.error(
        { ...errorInfo(err), size: batch.length },
        'rabbitmq consumer: unexpected batch failure; requeueing',
      );
      for (const d of batch) this.#nack(d.session, d.message);
      return;
    }
    const outcomes = new Map<(typeof items)[number], Outcome>();
    const toHandle = items.filter((item) => {
      const oversize = this.#oversize(item.message, item.inbound);
      if (oversize) outcomes.set(item, oversize);
      return oversize === undefined;
    });
    const release = this.#hold(toHandle.map((item) => item.inbound.id));
    try {
      const handled = await o.handler.handleBatch(toHandle.map((item) => item.inbound));
      toHandle.forEach((item, k) => outcomes.set(item, handled[k]!));
    } catch (err) {
      o.logger.error(
        { ...errorInfo(err), size: batch.length },
        'rabbitmq consumer: unexpected batch failure; requeueing',
      );
      for (const item of toHandle) this.#nack(item.session, item.message);
    } finally {
      release();
    }
    await Promise.all(
      [...outcomes].map(async ([item, outcome]) => {
        try {
          await this.#settle(item.session, item.message, item.inbound, outcome);
        } catch (err) {
          o.logger.error(
            { ...errorInfo(err), messageId: item.inbound.id },
            'rabbitmq consumer: settle failed; requeueing',
          );
          this.#nack(item.session, item.message);
        }
      }),
    );
  }

  /**
   * A redelivered message may have killed the process that held it. Counting the attempt durably first lets
   * crash loops reach the DLQ (after maxAttempts + 1 deaths: the first left no trace). The broker's own count
   * (a quorum queue's x-delivery-count) is no attempt count: it also rises for messages a closed channel
   * returns unstarted. The record is the attempt about to run (the claim counts max(attempts + 1, started)),
   * so a redelivery that then runs loses nothing. Recorded once per id in hand, not per copy: a closed channel
   * returns every copy of an id it held (producer duplicates), and each copy's record would count one more
   * attempt before any claim consumed the first. Redeliveries are rare: no cost in the steady state.
   */
  async #recordAttemptStarted(inbound: InboundMessage): Promise<void> {
    if (inbound.id === undefined) return;
    try {
      await this.#o.handler.recordAttemptsStarted([inbound]);
    } catch (err) {
      this.#o.logger.warn(
        { ...errorInfo(err), messageId: inbound.id },
        'rabbitmq consumer: could not record the attempt',
      );
    }
  }

  async #settle(
    session: Session,
    message: AmqpMessage,
    inbound: InboundMessage,
    outcome: Outcome,
  ): Promise<void> {
    switch (outcome.status) {
      case 'processed':
      case 'duplicate':
        this.#ack(session, message);
        return;
      case 'retry':
        if (outcome.delayMs <= 0) {
          this.#nack(session, message);
          return;
        }
        if (
          (await this.#publishThenAck(
            session,
            message,
            [retryCopy(message, inbound, outcome, this.#o.topology)],
            outcome.delayMs,
          )) === 'too-large'
        ) {
          // The delay queue cannot take this message's headers on any attempt: requeueing it would loop, so it
          // goes to the DLQ now, with its reason.
          await this.#deadLetter(session, message, inbound, retryCopyTooLarge(outcome));
        }
        return;
      case 'dead-letter':
        await this.#deadLetter(session, message, inbound, outcome);
        return;
    }
  }

  /** Publishes the dead letter in the largest of core's forms amqplib can encode, then acks. */
  async #deadLetter(
    session: Session,
    message: AmqpMessage,
    inbound: InboundMessage,
    outcome: DeadLetterOutcome,
  ): Promise<void> {
    const copies = deadLetterCopies(this.#o.handler.name, message, inbound, outcome, this.#o.topology);
    // Every form refused as too large cannot happen (the minimal form carries only inboxkit's short headers
    // and a clipped id); were it to, the original stays, as on an outage, rather than be lost.
    if ((await this.#publishThenAck(session, message, copies, 1_000)) === 'too-large')
      await this.#leave(
        session,
        message,
        copies.at(-1)!,
        new Error('no dead-letter form could be encoded'),
        1_000,
      );
  }

  /**
   * Publishes the first of `copies` (forms of one copy, largest first) that amqplib can encode on the
   * delivering channel (a confirm channel), waits for the broker's confirm, and only then acks the original.
   * A form refused as too large (`MessageTooLargeError`: refused on every attempt) gives way to the next; when
   * every form is, nothing is settled and `too-large` is returned. Any other failure is an outage: the original
   * is held back for a while (so a broken path does not spin) and requeued; a redelivery yields the same
   * outcome again, so nothing is lost.
   */
  async #publishThenAck(
    session: Session,
    message: AmqpMessage,
    copies: readonly RawPublish[],
    holdMs: number,
  ): Promise<'settled' | 'too-large'> {
    if (!session.alive) return 'settled';
    const result = await sendInFittingForm(copies, async (copy) => {
      try {
        await confirmPublish(session.channel, [copy], this.#o.confirmTimeoutMs);
        return { status: 'sent' };
      } catch (error) {
        return { status: isTooLarge(error) ? 'too-large' : 'failed', error };
      }
    });
    if (result.status === 'too-large') return 'too-large';
    if (result.status === 'failed') {
      await this.#leave(session, message, result.form, result.error, holdMs);
      return 'settled';
    }
    const index = copies.indexOf(result.form);
    if (index > 0) {
      this.#o.logger.warn(
        { messageId: idOf(result.form), form: DEAD_LETTER_FORMS[index], exchange: result.form.exchange },
        'rabbitmq consumer: the copy was too large for AMQP headers; sent in a smaller form',
      );
    }
    this.#ack(session, message);
    return 'settled';
  }

  /** Leaves the original unacked after a failed publish of `copy`: held back, then requeued. */
  async #leave(
    session: Session,
    message: AmqpMessage,
    copy: RawPublish,
    err: unknown,
    holdMs: number,
  ): Promise<void> {
    this.#o.logger.error(
      { ...errorInfo(err), messageId: idOf(copy), exchange: copy.exchange, routingKey: copy.routingKey },
      'rabbitmq consumer: copy not confirmed; the original stays in the queue',
    );
    // A dead channel already returned the original; otherwise hold it so a broken path does not spin.
    if (session.alive) await abortableSleep(Math.min(holdMs, 5_000), this.#stopSignal.signal);
    this.#nack(session, message);
  }

  #ack(session: Session, message: AmqpMessage): void {
    if (!session.alive) return; // The broker already took it back; the inbox absorbs the redelivery.
    session.acks.ack(message);
  }

  #nack(session: Session, message: AmqpMessage): void {
    if (!session.alive) return;
    try {
      session.channel.nack(message, false, true);
      session.acks.settledAlone(message);
    } catch (err) {
      this.#o.logger.debug(errorInfo(err), 'rabbitmq consumer: nack on a closing channel dropped');
    }
  }
}

/** A copy amqplib refuses on every attempt (`MessageTooLargeError`, matched by code across duplicate installs). */
function isTooLarge(error: unknown): boolean {
  return isInboxkitError(error) && error.code === 'MESSAGE_TOO_LARGE';
}

/** The id a copy carries, for logs. */
function idOf(copy: RawPublish): unknown {
  return copy.options.messageId ?? copy.options.headers?.['message-id'];
}

/**
 * The dead-letter outcome of a retry whose delay-queue copy cannot be encoded (headers over 64 KiB with the
 * retry headers): reason `retry-copy-too-large`, the handler's error kept when there was one.
 */
function retryCopyTooLarge(outcome: RetryOutcome): DeadLetterOutcome {
  return {
    status: 'dead-letter',
    messageId: outcome.messageId,
    reason: 'retry-copy-too-large',
    attempts: outcome.attempt,
    error:
      outcome.error ??
      toErrorInfo(new MessageTooLargeError('the delay-queue copy exceeds the 64 KiB AMQP header table')),
  };
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
