// The NATS JetStream transport, on core's delivery kit: pulls from a durable consumer and settles each outcome
// through four JetStream verbs — a confirmed ack only once the effect is durable, nak(delay) for a retry, the
// dead letter published to the DLQ subject (acknowledged by its stream) and then term(). Held messages are kept
// with working() (ack-wait extension), so a long handler keeps its message. What to do with an outcome, the
// store-outage policy and which redeliveries are charged an attempt are the kit's; this file receives and
// schedules, and the verbs are `NatsSettlement` (nats-settlement.ts).

import {
  abortableSleep,
  backstopLimit,
  ConfigurationError,
  DeliveryKit,
  DeliveryScheduler,
  isBackstop,
  optionChecks,
  retryStart,
  settledWithin,
  startRetryDelay,
  transportLogger,
} from '@inboxkit/core';
import type {
  GuardedOutcome,
  IdempotentConsumer,
  Logger,
  TransportConsumer,
  TransportFeatures,
} from '@inboxkit/core';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerMessages, JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

import { isNotFound } from './nats-headers.js';
import { NatsSettlement, quietly } from './nats-settlement.js';
import type { Held } from './nats-settlement.js';
import { natsStartFailure } from './start-retry.js';
import { toInboundMessage } from './to-inbound-message.js';

/**
 * What JetStream guarantees, for the kit and the conformance suite: a native delay (`nak(delay)`), no ordering
 * promise across a retry (unless `orderedBySubject`), no delivery count passed to core (JetStream's counts
 * deliveries, not attempts), and a redelivery spends a delivery against `max_deliver`.
 */
export const NATS_FEATURES: TransportFeatures = Object.freeze({
  ordering: 'none',
  nativeDelay: true,
  deliveryCount: false,
  redeliverSpendsCount: true,
});

/** The reason a dead letter carries when JetStream's delivery limit (`max_deliver`), not `maxAttempts`, ended it. */
export const MAX_DELIVERIES_REASON = 'max-deliveries';

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
  /** Messages held unacknowledged (JetStream `max_ack_pending`), running ones included. Default is twice `concurrency`. */
  readonly maxAckPending?: number;
  /**
   * JetStream `ack_wait`: how long a delivery may stay unacknowledged before the server redelivers it. Held
   * messages are kept with `working()` every third of it. At least 1,000 ms. Default is 30,000 ms.
   */
  readonly ackWaitMs?: number;
  /**
   * JetStream `max_deliver`, the backstop above `maxAttempts`: a delivery that reaches it and would be retried
   * is dead-lettered with reason `max-deliveries` instead. Must exceed `maxAttempts`. Default is
   * `maxAttempts * 2 + 10` (deliveries also rise without an attempt: a crash, a stop, a failed dead letter).
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
  /** How long `start()` keeps trying while JetStream does not answer. Default is 60,000 ms. */
  readonly startTimeoutMs?: number;
  /** Where the transport logs. Default is the handler's logger. */
  readonly logger?: Logger;
}

const WHAT = 'natsConsumer';
const check = optionChecks(WHAT);

/**
 * Consumes a JetStream stream through an idempotent consumer, on a durable pull consumer that `start()`
 * creates or updates (explicit acks, `ack_wait`, `max_deliver` as the backstop, `max_ack_pending`).
 *
 * - processed / duplicate → `ackAck()`: acknowledged, and confirmed by the server, only after the commit;
 * - retry → `nak(delayMs)`: JetStream redelivers after the delay (with `orderedBySubject`, the retry waits here);
 * - the inbox store down → the message is kept (working()) and tried again here, so an outage spends no delivery;
 * - dead-letter → the copy goes to `deadLetterSubject` with inboxkit's headers, the DLQ stream's acknowledgement is
 *   awaited, then `term()`; when the publish fails the message is nak()ed and comes back.
 *
 * The id is `Nats-Msg-Id` (then `message-id`, then the CloudEvents id). A redelivery (JetStream `deliveryCount`
 * above 1) that core names a crash suspect runs alone with a started attempt recorded first, so a message that
 * kills its process still reaches the DLQ after `maxAttempts`; `max_deliver` ends what nothing else could.
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
  readonly #startTimeoutMs: number;
  readonly #ordered: boolean;
  readonly #log: Logger;
  readonly #js: JetStreamClient;
  readonly #stop = new AbortController();
  /** Core's delivery kit over JetStream's verbs: guarded handle, attempt charger, settle. */
  readonly #kit: DeliveryKit<Held>;
  /** Core's scheduler: `concurrency` at once, a crash suspect alone, one per subject when ordered. */
  readonly #scheduler: DeliveryScheduler<Held>;
  #messages: ConsumerMessages | undefined;
  #loop: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  /** Received and not settled: each is kept with working() until it is. */
  readonly #held = new Set<Held>();
  /** Received, not routed yet (its suspicion being read), in arrival order. */
  #routing: Promise<void> = Promise.resolve();

  constructor(options: NatsConsumerOptions<P, Tx>) {
    if (typeof options.connection?.publish !== 'function') {
      throw new ConfigurationError(
        `${WHAT}: \`connection\` must be a NatsConnection (connect() of @nats-io/transport-node)`,
      );
    }
    for (const name of ['stream', 'consumer', 'deadLetterSubject'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '')
        throw new ConfigurationError(`${WHAT}: \`${name}\` must be a non-empty string`);
    }
    check.handler(options.handler);
    this.#o = options;
    this.#concurrency = check.integer('concurrency', options.concurrency, 8);
    this.#maxAckPending = check.integer('maxAckPending', options.maxAckPending, this.#concurrency * 2);
    if (this.#maxAckPending < this.#concurrency) {
      throw new ConfigurationError(
        `${WHAT}: \`maxAckPending\` (${this.#maxAckPending}) must be at least \`concurrency\` (${this.#concurrency})`,
      );
    }
    this.#ackWaitMs = check.integer('ackWaitMs', options.ackWaitMs, 30_000, { min: 1_000 });
    const maxAttempts = options.handler.config.maxAttempts;
    this.#maxDeliver = check.integer(
      'maxDeliver',
      options.maxDeliver,
      backstopLimit(maxAttempts, { headroom: (n) => n + 10 }),
    );
    if (!isBackstop(this.#maxDeliver, maxAttempts)) {
      throw new ConfigurationError(
        `${WHAT}: \`maxDeliver\` (${this.#maxDeliver}) must be above the handler's maxAttempts (${maxAttempts}): it is the backstop, and deliveries also rise without an attempt (a crash, a stop)`,
      );
    }
    this.#closeTimeoutMs = check.integer('closeTimeoutMs', options.closeTimeoutMs, 30_000);
    this.#startTimeoutMs = check.integer('startTimeoutMs', options.startTimeoutMs, 60_000);
    this.#ordered = options.orderedBySubject ?? false;
    this.#log = transportLogger(options.logger, options.handler);
    this.#js = jetstream(options.connection);
    const running = () => !this.#stop.signal.aborted;
    this.#scheduler = new DeliveryScheduler<Held>({
      concurrency: this.#concurrency,
      running,
      run: ([held]) => this.#run(held!).finally(() => this.#held.delete(held!)),
      alone: (h) => h.suspect,
      ...(this.#ordered ? { key: (h: Held) => h.msg.subject } : {}),
    });
    this.#kit = new DeliveryKit<Held>({
      consumer: options.handler,
      features: NATS_FEATURES,
      running,
      sleep: (ms) => abortableSleep(ms, this.#stop.signal),
      message: (h) => h.inbound,
      mayHaveCrashed: (h) => h.msg.info.deliveryCount > 1,
      // A nak()ed retry comes back with a higher deliveryCount too: the inbox tells it from a crash.
      retriesLookRedelivered: true,
      logger: this.#log,
      what: WHAT,
      context: { stream: options.stream },
      deliveryContext: (h) => ({ subject: h.msg.subject, seq: h.msg.info.streamSequence }),
      port: new NatsSettlement(
        this.#js,
        options.connection,
        options.deadLetterSubject,
        options.handler.name,
        this.#log,
      ),
    });
  }

  start(): Promise<void> {
    if (this.#stopping) return Promise.reject(new ConfigurationError(`${WHAT}: start() after stop()`));
    return (this.#starting ??= this.#start());
  }

  async #start(): Promise<void> {
    const started = await retryStart({
      attempt: () => this.#subscribe(),
      permanent: natsStartFailure,
      delayMs: (n) => startRetryDelay(n, 200, 5_000),
      timeoutMs: this.#startTimeoutMs,
      signal: this.#stop.signal,
      abandon: (pending) => void pending.then((m) => m.close()).catch(() => {}),
      logger: this.#log,
      what: WHAT,
      context: { stream: this.#o.stream, consumer: this.#o.consumer },
      service: 'the NATS server',
    });
    if (started === undefined) return; // stopped while starting
    this.#messages = started.value;
    this.#heartbeat = setInterval(
      () => {
        for (const h of this.#held) quietly(() => h.msg.working());
      },
      Math.max(250, Math.floor(this.#ackWaitMs / 3)),
    );
    this.#heartbeat.unref?.();
    this.#loop = this.#receive(started.value);
  }

  async #subscribe(): Promise<ConsumerMessages> {
    const jsm = await jetstreamManager(this.#o.connection);
    await this.#checkStreams(jsm);
    await this.#ensureConsumer(jsm);
    const consumer = await this.#js.consumers.get(this.#o.stream, this.#o.consumer);
    return consumer.consume({ max_messages: this.#maxAckPending });
  }

  async #checkStreams(jsm: JetStreamManager): Promise<void> {
    try {
      await jsm.streams.info(this.#o.stream);
    } catch (error) {
      if (!isNotFound(error)) throw error;
      throw new ConfigurationError(
        `${WHAT}: stream ${JSON.stringify(this.#o.stream)} does not exist (create it, e.g. with ensureStreams())`,
        { cause: error },
      );
    }
    try {
      await jsm.streams.find(this.#o.deadLetterSubject);
    } catch (error) {
      if ((error as { name?: string }).name !== 'Error' && !isNotFound(error)) throw error;
      throw new ConfigurationError(
        `${WHAT}: no stream captures the dead-letter subject ${JSON.stringify(this.#o.deadLetterSubject)}, so dead letters would be lost: create a DLQ stream (e.g. with ensureStreams())`,
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
    } catch (error) {
      if (!isNotFound(error)) throw error;
      await jsm.consumers.add(this.#o.stream, {
        durable_name: this.#o.consumer,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ...settings,
      });
      return;
    }
    await jsm.consumers.update(this.#o.stream, this.#o.consumer, settings);
  }

  async #receive(messages: ConsumerMessages): Promise<void> {
    try {
      for await (const msg of messages) {
        if (this.#stop.signal.aborted) {
          quietly(() => msg.nak()); // received after stop(): back to the broker at once
          continue;
        }
        const held: Held = { msg, inbound: toInboundMessage(msg), suspect: false, deadLettered: false };
        this.#held.add(held);
        // Routed in arrival order once the inbox said whether it may have crashed a process.
        this.#routing = this.#routing.then(async () => {
          const charger = this.#kit.charger;
          if (charger.maySuspect(held)) held.suspect = (await charger.suspects([held])).has(held);
          this.#scheduler.push(held);
        });
      }
    } catch (error) {
      if (!this.#stop.signal.aborted) this.#log.error({ err: error }, `${WHAT}: the message iterator failed`);
    }
  }

  /** Charge-before-run, handle (guarded), then settle through the kit. Never rejects. */
  async #run(held: Held): Promise<void> {
    const { charger, guard } = this.#kit;
    let outcome = await charger.charged([held], async (): Promise<GuardedOutcome> => {
      let handled = await guard.handle(held.inbound);
      // Ordered: a retry waits here, kept with working(), so nothing of its subject overtakes it.
      while (this.#ordered && handled.status === 'retry' && !this.#stop.signal.aborted) {
        await abortableSleep(handled.delayMs, this.#stop.signal);
        if (this.#stop.signal.aborted) break;
        handled = await guard.handle(held.inbound);
      }
      return handled;
    });
    // The charger learns the outcome as handled (a retry whose handler did not run went back unrun), not as the
    // backstop below may turn it; `settle` then tells it again, which changes nothing for a dead letter.
    charger.settled(held, outcome);
    if (outcome.status === 'retry' && held.msg.info.deliveryCount >= this.#maxDeliver) {
      // JetStream will not deliver it again: dead-letter it with its record rather than lose it to the backstop.
      outcome = {
        status: 'dead-letter',
        messageId: outcome.messageId,
        reason: MAX_DELIVERIES_REASON,
        attempts: outcome.attempt,
        ...(outcome.error !== undefined ? { error: outcome.error } : {}),
      };
    }
    await this.#kit.settle(held, outcome);
  }

  stop(): Promise<void> {
    return (this.#stopping ??= this.#stopNow());
  }

  async #stopNow(): Promise<void> {
    this.#stop.abort();
    await this.#starting?.catch(() => {});
    await this.#messages?.close().catch(() => {});
    await this.#routing;
    // Waiting, never started: back to the broker at once, and charged nothing when they come back.
    const unrun = this.#scheduler.stop();
    this.#kit.charger.returned(unrun);
    for (const held of unrun) {
      quietly(() => held.msg.nak());
      this.#held.delete(held);
    }
    await settledWithin(this.#scheduler.idle(), this.#closeTimeoutMs);
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    await this.#loop?.catch(() => {});
    await this.#o.connection.flush().catch(() => {});
  }
}
