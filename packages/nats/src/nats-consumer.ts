// The NATS JetStream transport: pulls from a durable consumer, hands each message to the idempotent consumer, and
// maps its outcome to JetStream — a confirmed ack only once the effect is durable, a retry is nak(delay), a dead
// letter is published to the DLQ subject (acknowledged by its stream) and only then term()inated. Held messages
// are kept with working() (ack-wait extension), so a long handler keeps its message.

import {
  ConfigurationError,
  deadLetterForms,
  deadLetterRecord,
  sendInFittingForm,
} from '@inboxkit/core';
import type {
  DeadLetterOutcome,
  DeadLetterReason,
  IdempotentConsumer,
  InboundMessage,
  Logger,
  Outcome,
  TransportConsumer,
} from '@inboxkit/core';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

import { backstopDeliveries, MAX_DELIVERIES_REASON, settlementFor } from './delivery-policy.js';
import type { Settlement } from './delivery-policy.js';
import { publishConfirmed } from './nats-publisher.js';
import { isNotFound } from './nats-headers.js';
import { toInboundMessage } from './to-inbound-message.js';

/** Options of `natsConsumer`. */
export interface NatsConsumerOptions<P, Tx> {
  /** A connection (`connect()` of `@nats-io/transport-node`). The consumer never closes it. */
  readonly connection: NatsConnection;
  /** The stream to consume. It must exist (see `ensureStreams`). */
  readonly stream: string;
  /** The durable consumer's name; `start()` creates it, or updates its settings. */
  readonly consumer: string;
  /** Only these subjects of the stream (JetStream `filter_subjects`). Default is all of the stream's subjects. */
  readonly filterSubjects?: readonly string[];
  /** Where dead letters go: a subject that a stream (the DLQ stream) captures. Checked at `start()`. */
  readonly deadLetterSubject: string;
  /** The idempotent consumer each message goes through. */
  readonly handler: IdempotentConsumer<P, Tx>;
  /** Handlers running at once. Default is 8. */
  readonly concurrency?: number;
  /** Messages held unacknowledged (JetStream `max_ack_pending`), handlers included. Default is twice `concurrency`. */
  readonly maxAckPending?: number;
  /**
   * JetStream `ack_wait`: how long a delivery may stay unacknowledged before the server redelivers it. Held
   * messages are kept with `working()` every third of it, so a long handler keeps its message. Default is 30,000 ms.
   */
  readonly ackWaitMs?: number;
  /**
   * JetStream `max_deliver`, the backstop above `maxAttempts`: the delivery that reaches it and would be retried
   * is dead-lettered with reason `max-deliveries`. Must exceed `maxAttempts`. Default is `maxAttempts * 2 + 10`.
   */
  readonly maxDeliver?: number;
  /**
   * Keep order per subject: the messages of one subject run one at a time in stream order, and a retry waits in
   * this process (kept with working()) instead of nak(), so nothing of its subject overtakes it. Subjects run in
   * parallel up to `concurrency`. Default is false.
   */
  readonly orderedBySubject?: boolean;
  /** How long `stop()` waits for running handlers. Default is 30,000 ms. */
  readonly closeTimeoutMs?: number;
  /** Where the transport logs. Default is the handler's logger. */
  readonly logger?: Logger;
}

interface Held {
  readonly msg: JsMsg;
  readonly inbound: InboundMessage;
  /** Ordered mode: the subject queue it waits in. */
  readonly key: string;
}

const DEFAULT_CONCURRENCY = 8;

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v <= 0) throw new ConfigurationError(`natsConsumer: \`${name}\` must be a positive integer, got ${v}`);
  return v;
}

/**
 * Sends a fire-and-forget settlement (nak, term, working). On a closed connection the client throws: the
 * message then comes back after its ack wait, which is what leaving it to the broker means.
 */
function quietly(settle: () => void): void {
  try {
    settle();
  } catch {
    // The connection is gone: JetStream redelivers after the ack wait.
  }
}

/** Sleeps `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Consumes a JetStream stream through an idempotent consumer, on a durable pull consumer that `start()`
 * creates (explicit acks, `ack_wait`, `max_deliver` as the backstop, `max_ack_pending`).
 *
 * - processed / duplicate → `ackAck()`: acknowledged, and confirmed by the server, only after the commit;
 * - retry → `nak(delayMs)`: JetStream redelivers after the delay (with `orderedBySubject`, the retry waits here);
 * - retry because the inbox store is down → the message is kept (working()) and tried again here after a pause,
 *   so an outage spends no delivery;
 * - dead-letter → the copy is published to `deadLetterSubject` with inboxkit's headers and the DLQ stream's
 *   acknowledgement awaited, then `term()`; when the publish fails the message is nak()ed and comes back.
 *
 * The message id is `Nats-Msg-Id` (then `message-id`, then the CloudEvents id). A redelivery that may have been
 * running when a process died (core's `crashSuspects`) runs alone with its attempt recorded first, so a message
 * that kills the process still reaches the DLQ after `maxAttempts`; JetStream's `deliveryCount` decides which
 * deliveries are redeliveries, and its `max_deliver` ends what nothing else could.
 *
 * @example
 * const nc = await connect({ servers: process.env.NATS_URL });
 * const consumer = natsConsumer({
 *   connection: nc,
 *   stream: 'ORDERS',
 *   consumer: 'orders-inbox',
 *   deadLetterSubject: 'dlq.orders',
 *   handler: idempotentConsumer({ name: 'orders', store, handler: applyOrder }),
 * });
 * await consumer.start();
 * process.once('SIGTERM', () => void consumer.stop());
 */
export function natsConsumer<P, Tx>(options: NatsConsumerOptions<P, Tx>): TransportConsumer {
  return new NatsConsumer(options);
}

class NatsConsumer<P, Tx> implements TransportConsumer {
  readonly #o: NatsConsumerOptions<P, Tx>;
  readonly #concurrency: number;
  readonly #maxAckPending: number;
  readonly #ackWaitMs: number;
  readonly #maxDeliver: number;
  readonly #closeTimeoutMs: number;
  readonly #ordered: boolean;
  readonly #log: Logger;
  readonly #js: JetStreamClient;
  #messages: ConsumerMessages | undefined;
  #loop: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  readonly #stop = new AbortController();
  /** Received and not settled: each is kept with working() until it is. */
  readonly #held = new Set<Held>();
  /** Waiting for a handler, in arrival order (unordered mode) or per subject (ordered mode). */
  readonly #waiting: Held[] = [];
  readonly #busyKeys = new Set<string>();
  #running = 0;
  readonly #tasks = new Set<Promise<void>>();
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  /** One crash suspect runs at a time (see `#run`). */
  #suspectChain: Promise<void> = Promise.resolve();

  constructor(options: NatsConsumerOptions<P, Tx>) {
    if (typeof options.connection?.publish !== 'function') {
      throw new ConfigurationError('natsConsumer: `connection` must be a NatsConnection (connect() of @nats-io/transport-node)');
    }
    for (const name of ['stream', 'consumer', 'deadLetterSubject'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '') {
        throw new ConfigurationError(`natsConsumer: \`${name}\` must be a non-empty string`);
      }
    }
    if (typeof options.handler?.handle !== 'function') {
      throw new ConfigurationError('natsConsumer: `handler` must be an idempotentConsumer()');
    }
    this.#o = options;
    this.#concurrency = positiveInteger('concurrency', options.concurrency, DEFAULT_CONCURRENCY);
    this.#maxAckPending = positiveInteger('maxAckPending', options.maxAckPending, this.#concurrency * 2);
    if (this.#maxAckPending < this.#concurrency) {
      throw new ConfigurationError(`natsConsumer: \`maxAckPending\` (${this.#maxAckPending}) must be at least \`concurrency\` (${this.#concurrency})`);
    }
    this.#ackWaitMs = positiveInteger('ackWaitMs', options.ackWaitMs, 30_000);
    if (this.#ackWaitMs < 1_000) throw new ConfigurationError(`natsConsumer: \`ackWaitMs\` must be at least 1,000 ms, got ${this.#ackWaitMs}`);
    const maxAttempts = options.handler.config.maxAttempts;
    this.#maxDeliver = positiveInteger('maxDeliver', options.maxDeliver, backstopDeliveries(maxAttempts));
    if (this.#maxDeliver <= maxAttempts) {
      throw new ConfigurationError(
        `natsConsumer: \`maxDeliver\` (${this.#maxDeliver}) must be above the handler's maxAttempts (${maxAttempts}): it is the backstop, and deliveries also rise without an attempt (a crash, a stop)`,
      );
    }
    this.#closeTimeoutMs = positiveInteger('closeTimeoutMs', options.closeTimeoutMs, 30_000);
    this.#ordered = options.orderedBySubject ?? false;
    this.#log = options.logger ?? options.handler.config.logger ?? silent;
    this.#js = jetstream(options.connection);
  }

  start(): Promise<void> {
    if (this.#stopping) return Promise.reject(new ConfigurationError('natsConsumer: start() after stop()'));
    return (this.#starting ??= this.#start());
  }

  async #start(): Promise<void> {
    const jsm = await jetstreamManager(this.#o.connection);
    await this.#checkStreams(jsm);
    await this.#ensureConsumer(jsm);
    const consumer = await this.#js.consumers.get(this.#o.stream, this.#o.consumer);
    this.#messages = await consumer.consume({ max_messages: this.#maxAckPending });
    this.#heartbeat = setInterval(() => {
      for (const h of this.#held) quietly(() => h.msg.working());
    }, Math.max(250, Math.floor(this.#ackWaitMs / 3)));
    this.#heartbeat.unref?.();
    this.#loop = this.#receive(this.#messages);
  }

  async #checkStreams(jsm: JetStreamManager): Promise<void> {
    try {
      await jsm.streams.info(this.#o.stream);
    } catch (error) {
      if (isNotFound(error)) {
        throw new ConfigurationError(`natsConsumer: stream ${JSON.stringify(this.#o.stream)} does not exist (create it, e.g. with ensureStreams())`, { cause: error });
      }
      throw error;
    }
    try {
      await jsm.streams.find(this.#o.deadLetterSubject);
    } catch (error) {
      throw new ConfigurationError(
        `natsConsumer: no stream captures the dead-letter subject ${JSON.stringify(this.#o.deadLetterSubject)}: dead letters would be lost (create a DLQ stream, e.g. with ensureStreams())`,
        { cause: error },
      );
    }
  }

  async #ensureConsumer(jsm: JetStreamManager): Promise<void> {
    const settings = {
      ack_wait: nanos(this.#ackWaitMs),
      max_deliver: this.#maxDeliver,
      max_ack_pending: this.#maxAckPending,
      ...(this.#o.filterSubjects !== undefined ? { filter_subjects: [...this.#o.filterSubjects] } : {}),
    };
    try {
      await jsm.consumers.info(this.#o.stream, this.#o.consumer);
      await jsm.consumers.update(this.#o.stream, this.#o.consumer, settings);
    } catch (error) {
      if (!(isNotFound(error))) throw error;
      await jsm.consumers.add(this.#o.stream, {
        durable_name: this.#o.consumer,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ...settings,
      });
    }
  }

  async #receive(messages: ConsumerMessages): Promise<void> {
    try {
      for await (const msg of messages) {
        if (this.#stop.signal.aborted) {
          // Received after stop(): leave it to the broker at once.
          quietly(() => msg.nak());
          continue;
        }
        const held: Held = { msg, inbound: toInboundMessage(msg), key: this.#ordered ? msg.subject : '' };
        this.#held.add(held);
        this.#waiting.push(held);
        this.#dispatch();
      }
    } catch (error) {
      if (!this.#stop.signal.aborted) this.#log.error({ err: error }, 'natsConsumer: the message iterator failed');
    }
  }

  /** Starts handlers for waiting messages while slots are free (ordered: one per subject at a time). */
  #dispatch(): void {
    for (let i = 0; i < this.#waiting.length && this.#running < this.#concurrency; ) {
      const held = this.#waiting[i]!;
      if (this.#ordered && this.#busyKeys.has(held.key)) {
        i++;
        continue;
      }
      this.#waiting.splice(i, 1);
      this.#running++;
      if (this.#ordered) this.#busyKeys.add(held.key);
      const task = this.#run(held).finally(() => {
        this.#running--;
        if (this.#ordered) this.#busyKeys.delete(held.key);
        this.#tasks.delete(task);
        if (!this.#stop.signal.aborted) this.#dispatch();
      });
      this.#tasks.add(task);
    }
  }

  /**
   * Runs one delivery to its settlement. A redelivery (deliveryCount > 1) whose id core names a crash suspect
   * runs alone, its started attempt recorded just before, so a crash charges one suspect at most.
   */
  async #run(held: Held): Promise<void> {
    try {
      if (held.msg.info.deliveryCount > 1 && held.inbound.id !== undefined && (await this.#isSuspect(held.inbound))) {
        let release!: () => void;
        const previous = this.#suspectChain;
        this.#suspectChain = new Promise<void>((resolve) => (release = resolve));
        await previous;
        try {
          await this.#o.handler.recordAttemptsStarted([held.inbound]).catch((error: unknown) => {
            this.#log.warn({ err: error, messageId: held.inbound.id }, 'natsConsumer: could not record a started attempt');
          });
          await this.#handleAndSettle(held);
        } finally {
          release();
        }
        return;
      }
      await this.#handleAndSettle(held);
    } catch (error) {
      // Never leave a delivery unsettled for a fault of ours: it comes back.
      this.#log.error({ err: error, messageId: held.inbound.id }, 'natsConsumer: settling failed; the message is redelivered');
      quietly(() => held.msg.nak(1_000));
    } finally {
      this.#held.delete(held);
    }
  }

  async #isSuspect(inbound: InboundMessage): Promise<boolean> {
    const suspects = this.#o.handler.crashSuspects;
    if (suspects === undefined) return true;
    const found = await suspects.call(this.#o.handler, [inbound]);
    return found.has(inbound.id!);
  }

  async #handleAndSettle(held: Held): Promise<void> {
    const lastDelivery = held.msg.info.deliveryCount >= this.#maxDeliver;
    for (let storePauses = 0; ; ) {
      const outcome = await this.#o.handler.handle(held.inbound);
      const settlement: Settlement = settlementFor(outcome, { holdRetries: this.#ordered, lastDelivery, storePauses });
      switch (settlement.action) {
        case 'ack':
          await held.msg.ackAck();
          return;
        case 'redeliver':
          quietly(() => held.msg.nak(settlement.delayMs));
          return;
        case 'dead-letter':
          await this.#deadLetter(held, outcome);
          return;
        case 'hold':
          if (outcome.status === 'retry' && outcome.reason === 'store-unavailable') storePauses++;
          await pause(settlement.delayMs, this.#stop.signal);
          if (this.#stop.signal.aborted) {
            // Stopping: leave it to the broker now rather than after the ack wait.
            quietly(() => held.msg.nak());
            return;
          }
      }
    }
  }

  async #deadLetter(held: Held, outcome: Outcome): Promise<void> {
    const dead: DeadLetterOutcome =
      outcome.status === 'dead-letter'
        ? outcome
        : {
            status: 'dead-letter',
            messageId: outcome.messageId,
            reason: MAX_DELIVERIES_REASON as DeadLetterReason,
            attempts: outcome.status === 'retry' ? outcome.attempt : 0,
            ...(outcome.status === 'retry' && outcome.error !== undefined ? { error: outcome.error } : {}),
          };
    const record = deadLetterRecord(this.#o.handler.name, held.inbound, dead);
    const original: Record<string, string> = { ...held.inbound.headers };
    // JetStream's own headers of the source copy do not travel: a Nats-Msg-Id would make the DLQ stream drop the copy.
    for (const name of Object.keys(original)) if (name.startsWith('nats-')) delete original[name];
    const { info } = held.msg;
    const result = await sendInFittingForm(deadLetterForms(record), async (spec) => {
      try {
        await publishConfirmed(
          this.#js,
          this.#o.connection,
          {
            destination: this.#o.deadLetterSubject,
            // One DLQ copy per source copy: a redelivery after a crash between the publish and term() is dropped
            // by the DLQ stream's duplicate window; a replayed message is a new source copy, so a new DLQ copy.
            id: `dlq:${info.stream}:${info.streamSequence}`,
            body: held.msg.data,
            headers: { ...(spec.originalHeaders ? original : {}), ...spec.headers },
          },
          30_000,
        );
        return { status: 'sent' };
      } catch (error) {
        return { status: (error as { code?: string }).code === 'MESSAGE_TOO_LARGE' ? 'too-large' : 'failed', error };
      }
    });
    if (result.status === 'sent') {
      // Terminated, not acked: JetStream then stops redelivering it and emits a MSG_TERMINATED advisory.
      quietly(() => held.msg.term(`inboxkit: dead-lettered (${dead.reason})`));
      await this.#o.connection.flush();
      return;
    }
    this.#log.error({ err: result.error, messageId: held.inbound.id }, 'natsConsumer: the dead letter was not published; the message comes back');
    quietly(() => held.msg.nak(5_000));
  }

  stop(): Promise<void> {
    return (this.#stopping ??= this.#stopNow());
  }

  async #stopNow(): Promise<void> {
    this.#stop.abort();
    await this.#starting?.catch(() => {});
    await this.#messages?.close().catch(() => {});
    // Waiting, never started: back to the broker at once.
    for (const held of this.#waiting.splice(0)) {
      quietly(() => held.msg.nak());
      this.#held.delete(held);
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...this.#tasks]),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, this.#closeTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    await this.#loop?.catch(() => {});
    await this.#o.connection.flush().catch(() => {});
  }
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

