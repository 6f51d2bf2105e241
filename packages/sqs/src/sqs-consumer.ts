// The SQS transport: long-polls a queue, hands each message to the idempotent consumer, and maps its outcome to
// SQS — delete only once the effect (or the dead letter) is durable, a retry is a visibility change, and held
// messages are kept invisible by a heartbeat. FIFO queues are handled one message per group at a time.

import { randomUUID } from 'node:crypto';

import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { Message } from '@aws-sdk/client-sqs';
import { abortableSleep, DeliveryKit, FIRST_OUTAGE_PAUSE_MS, settledWithin } from '@inboxkit/core';
import type { GuardedOutcome, TransportConsumer, TransportFeatures } from '@inboxkit/core';
import { checkQueuesAtStart } from './check-queues.js';
import { DEFAULT_MAX_SQS_MESSAGE_BYTES } from './dead-letter-message.js';
import { resolveSqsConsumerConfig } from './sqs-consumer-options.js';
import type { SqsConsumerConfig, SqsConsumerOptions } from './sqs-consumer-options.js';
import { SqsSettlement } from './sqs-settlement.js';
import { heldMessage } from './held-message.js';
import type { Held } from './held-message.js';
import { Slots } from './slots.js';
import type { VisibilityHeartbeat } from './visibility-heartbeat.js';

/** What happened to a held message: settled for good, or still in the queue (retry, failed DLQ publish). */
type Settlement = 'settled' | 'returned';

/** The messages of one FIFO group waiting in this process, in receive order. */
interface Group {
  readonly waiting: Held[];
}

const FIRST_POLL_BACKOFF_MS = FIRST_OUTAGE_PAUSE_MS;
const MAX_POLL_BACKOFF_MS = 5_000;

/**
 * Every receive raises `ApproximateReceiveCount` towards the redrive policy's `maxReceiveCount`, so the kit
 * rides a store outage out in process rather than hand the message back (`DeliveryGuard`).
 */
const SQS_OUTAGE: Pick<TransportFeatures, 'redeliverSpendsCount'> = Object.freeze({
  redeliverSpendsCount: true,
});

/**
 * Consumes an SQS queue through an idempotent consumer.
 *
 * - processed / duplicate → the message is deleted (DeleteMessageBatch), after the effect committed;
 * - retry → ChangeMessageVisibility to the retry delay (at most 12 h), not deleted: SQS redelivers it;
 * - dead-letter → SendMessage to `deadLetterQueueUrl` with the dead-letter attributes, then delete; if the send
 *   fails nothing is deleted and the message returns after its visibility timeout.
 *
 * Messages are long-polled in batches of up to 10 and handled by up to `concurrency` handlers at once; up to
 * `prefetch` more wait for a free handler, and every held message is kept invisible by a heartbeat. With
 * `mode: 'batch'` (standard queues) each received batch is handled by `handleBatch()` in one transaction. In a
 * FIFO queue (`.fifo`) the messages of one MessageGroupId are handled one at a time in order, groups in
 * parallel; a retried message returns the rest of its group to the queue behind it, so nothing overtakes it.
 * What happens to each message is core's delivery kit (`settle`, `AttemptCharger`, `DeliveryGuard`); this
 * transport receives, bounds concurrency and implements SQS's verbs (`SqsSettlement`).
 *
 * The options are validated when `sqsConsumer()` is called (visibility timeout above the handler timeout,
 * among others) and `start()` checks the queues unless `checkQueues` is false; both fail with a
 * `ConfigurationError` saying what to change.
 *
 * @example
 * const consumer = sqsConsumer({
 *   client: new SQSClient({}),
 *   queueUrl: process.env.ORDERS_QUEUE_URL!,
 *   deadLetterQueueUrl: process.env.ORDERS_DLQ_URL!,
 *   handler: idempotentConsumer({ name: 'orders', store, handler: applyOrder }),
 * });
 * await consumer.start();
 * process.once('SIGTERM', () => void consumer.stop());
 */
export function sqsConsumer<P, Tx>(options: SqsConsumerOptions<P, Tx>): TransportConsumer {
  return new SqsConsumer(Object.freeze({ ...options }), resolveSqsConsumerConfig(options));
}

class SqsConsumer<P, Tx> implements TransportConsumer {
  readonly #options: SqsConsumerOptions<P, Tx>;
  readonly #config: SqsConsumerConfig;
  readonly #heartbeat: VisibilityHeartbeat;
  /** Messages held (received, not settled) plus those asked for by receives in flight. */
  readonly #buffer: Slots;
  /** Handlers running. */
  readonly #handlers: Slots;
  #started = false;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  /** SQS's settlement verbs, driven by core's `settle()`. */
  readonly #port: SqsSettlement;
  /** Core's delivery kit over those verbs: guarded handle, attempt charger, settle. */
  readonly #kit: DeliveryKit<Held>;
  #running = false;
  /** Aborted by `stop()`: ends the back-off pause after a failed receive. */
  readonly #abort = new AbortController();
  /** Aborted by `stop()` when `abortReceiveOnStop`: ends a long poll in flight. */
  readonly #abortReceive = new AbortController();
  /** Aborted by `stop()` first thing: ends a start that is still retrying. */
  readonly #startAbort = new AbortController();
  #pollers: Promise<void>[] = [];
  readonly #tasks = new Set<Promise<unknown>>();
  readonly #groups = new Map<string, Group>();
  /** The last receive routed once its crash suspects were read (see `#dispatch`), and how many wait. */
  #routed: Promise<void> = Promise.resolve();
  #routesPending = 0;

  constructor(options: SqsConsumerOptions<P, Tx>, config: SqsConsumerConfig) {
    this.#options = options;
    this.#config = config;
    this.#buffer = new Slots(config.concurrency + config.prefetch);
    this.#handlers = new Slots(config.concurrency);
    const { client, handler } = options;
    this.#port = new SqsSettlement(client, config, handler.name);
    this.#heartbeat = this.#port.heartbeat;
    this.#kit = new DeliveryKit<Held>({
      consumer: handler,
      port: this.#port,
      features: SQS_OUTAGE,
      running: () => this.#running,
      sleep: (ms) => this.#sleep(ms),
      message: (h) => h.inbound,
      // SQS's receive count is no attempt count (it also rises for receives that ran nothing), so it is not
      // passed to core; a receive count above 1 only says the message may have crashed a process. A plain retry
      // comes back the same way, so the charger asks the inbox which are suspects.
      mayHaveCrashed: (h) => h.receiveCount > 1,
      retriesLookRedelivered: true,
      logger: config.logger,
      what: 'sqsConsumer',
      context: { queueUrl: config.queueUrl },
    });
  }

  start(): Promise<void> {
    this.#starting ??= this.#start();
    return this.#starting;
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #start(): Promise<void> {
    if (this.#stopping !== undefined) return;
    const config = this.#config;
    const { client, handler } = this.#options;
    if (config.checkQueues) {
      const checked = await checkQueuesAtStart(
        client,
        config,
        handler.config.maxAttempts,
        this.#startAbort.signal,
      );
      if (checked === undefined) return;
      this.#port.deadLetterMaxBytes = checked.deadLetterMaxBytes ?? DEFAULT_MAX_SQS_MESSAGE_BYTES;
    }
    if (this.#stopping !== undefined) return;
    this.#started = true;
    this.#heartbeat.start();
    this.#running = true;
    // Enough receives in flight to fill the buffer a batch at a time.
    const pollers = Math.max(1, Math.floor((config.concurrency + config.prefetch) / config.batchSize));
    this.#pollers = Array.from({ length: pollers }, () => this.#poll(config));
    config.logger.info(
      {
        queueUrl: config.queueUrl,
        consumer: handler.name,
        fifo: config.fifo,
        concurrency: config.concurrency,
      },
      'sqsConsumer started',
    );
  }

  async #stop(): Promise<void> {
    this.#startAbort.abort();
    await this.#starting?.catch(() => undefined);
    const config = this.#config;
    if (!this.#started) return;
    this.#running = false;
    // Wakes pollers and messages waiting for a handler (they go back to the queue), and ends a back-off
    // pause. A long poll in flight is aborted too (abortReceiveOnStop), so stop() does not wait up to
    // waitTimeSeconds for it: SQS keeps the aborted poll open on its side until its wait runs out, and what it
    // hands that poll stays hidden for one visibility timeout (no attempt is charged). Not aborted, the poll
    // ends within waitTimeSeconds and what it brings is returned to the queue at once.
    this.#buffer.close();
    this.#handlers.close();
    this.#abort.abort();
    if (config.abortReceiveOnStop) this.#abortReceive.abort();
    await Promise.all(this.#pollers);
    if (!(await settledWithin(this.#drainTasks(), config.closeTimeoutMs))) {
      this.#port.closed = true;
      config.logger.warn(
        { queueUrl: config.queueUrl, held: this.#heartbeat.size },
        'sqsConsumer stop: handlers still running after closeTimeoutMs; their messages reappear after the visibility timeout',
      );
    }
    await this.#port.deleter.drain();
    this.#heartbeat.stop();
    config.logger.info({ queueUrl: config.queueUrl }, 'sqsConsumer stopped');
  }

  async #drainTasks(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.all(this.#tasks);
  }

  #track(task: Promise<unknown>): void {
    const tracked = task.finally(() => this.#tasks.delete(tracked));
    this.#tasks.add(tracked);
  }

  // ---- receiving

  async #poll(config: SqsConsumerConfig): Promise<void> {
    // Ask for full batches: one receive costs a round trip whatever it brings.
    const want = Math.min(config.batchSize, config.concurrency + config.prefetch);
    let backoffMs = FIRST_POLL_BACKOFF_MS;
    while (this.#running) {
      if (!(await this.#buffer.acquire(want))) break;
      let messages: Message[];
      try {
        const result = await this.#options.client.send(
          new ReceiveMessageCommand({
            QueueUrl: config.queueUrl,
            MaxNumberOfMessages: want,
            WaitTimeSeconds: config.waitTimeSeconds,
            VisibilityTimeout: config.visibilityTimeoutSeconds,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
            // FIFO: the client's own retries of this receive (after a lost answer) get the same messages back
            // instead of leaving those hidden and their groups blocked until the visibility timeout.
            ...(config.fifo ? { ReceiveRequestAttemptId: randomUUID() } : {}),
          }),
          { abortSignal: this.#abortReceive.signal },
        );
        messages = result.Messages ?? [];
        backoffMs = FIRST_POLL_BACKOFF_MS;
      } catch (error) {
        this.#buffer.release(want);
        if (!this.#running) break;
        config.logger.warn(
          { error, queueUrl: config.queueUrl, retryInMs: backoffMs },
          'sqsConsumer: ReceiveMessage failed',
        );
        await this.#sleep(backoffMs);
        backoffMs = Math.min(MAX_POLL_BACKOFF_MS, backoffMs * 2);
        continue;
      }
      // Visibility started when SQS answered, give or take the network's latency; the heartbeat runs at half
      // the timeout, which absorbs that.
      const receivedAt = Date.now();
      this.#buffer.release(want - messages.length);
      if (!this.#running) {
        // Received while stopping: give them straight back.
        const held = messages.flatMap((m) => this.#hold(config, m, receivedAt) ?? []);
        this.#buffer.release(messages.length - held.length);
        await this.#returnAndFree(held);
        break;
      }
      this.#dispatch(config, messages, receivedAt);
    }
  }

  /** Resolves after `ms`, or at once when the consumer stops. */
  #sleep(ms: number): Promise<void> {
    return abortableSleep(ms, this.#abort.signal);
  }

  /** Starts holding a received message (heartbeat on); `undefined` for a message SQS sent without a handle. */
  #hold(config: SqsConsumerConfig, raw: Message, receivedAt: number): Held | undefined {
    const held = heldMessage(config, raw, receivedAt);
    if (held !== undefined) this.#heartbeat.track(held);
    return held;
  }

  #dispatch(config: SqsConsumerConfig, messages: readonly Message[], receivedAt: number): void {
    const received: { held: Held; groupId: string | undefined }[] = [];
    for (const raw of messages) {
      const held = this.#hold(config, raw, receivedAt);
      if (held === undefined) this.#buffer.release();
      else received.push({ held, groupId: config.fifo ? raw.Attributes?.MessageGroupId : undefined });
    }
    const read = this.#readSuspects(received.map((r) => r.held));
    if (read === undefined && this.#routesPending === 0) {
      this.#route(config, received);
      return;
    }
    // Receives are routed in the order they came, each once its suspects are known.
    this.#routesPending += 1;
    this.#routed = this.#routed
      .then(() => read)
      .then(() => {
        this.#routesPending -= 1;
        this.#route(config, received);
      });
    this.#track(this.#routed);
  }

  /**
   * Starts handling a receive's messages. Its crash suspects first: each waits for every handler (see
   * `#startHandling`), and from then on nothing else starts, so no message received with them gets ahead.
   */
  #route(config: SqsConsumerConfig, received: readonly { held: Held; groupId: string | undefined }[]): void {
    if (config.fifo) {
      // Order within a group is kept; the groups this receive opens start suspects first.
      const opened: { groupId: string; group: Group }[] = [];
      for (const { held, groupId } of received) {
        if (groupId === undefined) {
          this.#track(this.#handleOne(held));
          continue;
        }
        const group = this.#groups.get(groupId);
        if (group !== undefined) group.waiting.push(held);
        else {
          const created: Group = { waiting: [held] };
          this.#groups.set(groupId, created);
          opened.push({ groupId, group: created });
        }
      }
      // Groups headed by a suspect first, the one with the most attempts used first (see below).
      const rank = (o: { group: Group }) => o.group.waiting[0]!.suspect ?? -1;
      opened.sort((x, y) => rank(y) - rank(x));
      for (const { groupId, group } of opened) this.#track(this.#runGroup(groupId, group));
      return;
    }
    const held = received.map((r) => r.held);
    // The suspect with the most attempts used first: the one a crash could dead-letter soonest.
    const suspects = held.filter((h) => h.suspect !== undefined).sort((x, y) => y.suspect! - x.suspect!);
    for (const h of suspects) this.#track(this.#handleOne(h));
    const together = held.filter((h) => h.suspect === undefined);
    if (config.mode === 'batch') {
      // A chunk never needs more handlers than there are.
      for (let i = 0; i < together.length; i += config.concurrency) {
        this.#track(this.#handleChunk(together.slice(i, i + config.concurrency)));
      }
      return;
    }
    for (const h of together) this.#track(this.#handleOne(h));
  }

  // ---- settling

  /**
   * Reads which of a receive's messages are crash suspects (`AttemptCharger.suspects`, one read for the
   * receive) and marks them; `undefined` when none can be. Never rejects.
   */
  #readSuspects(held: readonly Held[]): Promise<void> | undefined {
    if (!held.some((h) => this.#kit.charger.maySuspect(h))) return undefined;
    return this.#kit.charger.suspects(held).then((suspects) => {
      for (const [h, used] of suspects) h.suspect = used;
    });
  }

  /**
   * Waits for a free handler (a crash suspect: for every handler, so it runs alone and a crash charges it
   * alone), then handles and settles `held`; when the consumer stops first, returns it to the queue unhandled.
   * Frees its buffer slot either way. Never rejects.
   */
  async #handleOne(held: Held): Promise<Settlement | 'stopped'> {
    const alone = held.suspect !== undefined;
    if (
      !this.#running ||
      !(await (alone ? this.#handlers.acquireAll(held.suspect) : this.#handlers.acquire()))
    ) {
      await this.#returnAndFree([held]);
      return 'stopped';
    }
    try {
      return await this.#settle(held, await this.#kit.handle(held));
    } finally {
      this.#handlers.release(alone ? this.#handlers.size : 1);
      this.#buffer.release();
    }
  }

  async #runGroup(groupId: string, group: Group): Promise<void> {
    try {
      for (let next = group.waiting.shift(); next !== undefined; next = group.waiting.shift()) {
        const result = await this.#handleOne(next);
        if (result !== 'settled') {
          // Back in the queue (or will be, or the consumer stops): what waits behind it must not overtake it.
          await this.#returnAndFree(group.waiting.splice(0));
        }
      }
    } finally {
      this.#groups.delete(groupId);
    }
  }

  /**
   * Batch mode: waits for handlers for the whole chunk, hands it to `handleBatch` (one transaction), then
   * settles each outcome. Returns the chunk to the queue unhandled when the consumer stops first. Frees the
   * chunk's buffer slots either way. Never rejects.
   */
  async #handleChunk(chunk: readonly Held[]): Promise<void> {
    if (!this.#running || !(await this.#handlers.acquire(chunk.length))) {
      await this.#returnAndFree(chunk);
      return;
    }
    try {
      const outcomes = await this.#kit.handleBatch(chunk);
      await Promise.all(chunk.map((h, i) => this.#settle(h, outcomes[i]!)));
    } finally {
      this.#handlers.release(chunk.length);
      this.#buffer.release(chunk.length);
    }
  }

  /** Settles one outcome through core's `settle()`: settled for good, or back in the queue. Never rejects. */
  async #settle(held: Held, outcome: GuardedOutcome): Promise<Settlement> {
    if (this.#port.closed) {
      // stop() gave up waiting: a late outcome is left to the visibility timeout.
      this.#kit.charger.settled(held, outcome);
      await this.#heartbeat.untrack(held);
      return 'returned';
    }
    const done = await this.#kit.settle(held, outcome);
    return done.action === 'acked' || done.action === 'dead-lettered' ? 'settled' : 'returned';
  }

  async #returnAndFree(held: readonly Held[]): Promise<void> {
    this.#kit.charger.returned(held);
    try {
      await this.#port.returnToQueue(held);
    } finally {
      this.#buffer.release(held.length);
    }
  }
}
