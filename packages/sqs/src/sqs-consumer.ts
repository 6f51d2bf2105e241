// The SQS transport: long-polls a queue, hands each message to the idempotent consumer, and maps its outcome to
// SQS — delete only once the effect (or the dead letter) is durable, a retry is a visibility change, and held
// messages are kept invisible by a heartbeat. FIFO queues are handled one message per group at a time.

import { randomUUID } from 'node:crypto';

import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { Message } from '@aws-sdk/client-sqs';
import type { DeadLetterOutcome, InboundMessage, Outcome, TransportConsumer } from '@inboxkit/core';
import { checkQueues } from './check-queues.js';
import { retryStart, sendInFittingForm } from '@inboxkit/core';
import { sqsStartFailure } from './start-retry.js';
import {
  DEAD_LETTER_FORMS,
  DEFAULT_MAX_SQS_MESSAGE_BYTES,
  deadLetterMessage,
  sqsMessageBytes,
} from './dead-letter-message.js';
import { DeleteBatcher } from './delete-batcher.js';
import { MAX_VISIBILITY_SECONDS, resolveSqsConsumerConfig } from './sqs-consumer-options.js';
import type { SqsConsumerConfig, SqsConsumerOptions } from './sqs-consumer-options.js';
import { Slots } from './slots.js';
import { toInboundMessage } from './to-inbound-message.js';
import { VisibilityHeartbeat } from './visibility-heartbeat.js';
import type { HeldMessage } from './visibility-heartbeat.js';

/** One received message while the consumer holds it. */
interface Held extends HeldMessage {
  readonly raw: Message;
  readonly inbound: InboundMessage;
  /** SQS's `ApproximateReceiveCount` of this receive (1 on the first). */
  readonly receiveCount: number;
  /**
   * A crash suspect (see `#startHandling`): the attempts it has used so far, set by `#readSuspects` before the
   * message is routed. `undefined` for any other message.
   */
  suspect: number | undefined;
}

/** What happened to a held message: settled for good, or still in the queue (retry, failed DLQ publish). */
type Settlement = 'settled' | 'returned';

/** The messages of one FIFO group waiting in this process, in receive order. */
interface Group {
  readonly waiting: Held[];
}

const FIRST_POLL_BACKOFF_MS = 100;
const MAX_POLL_BACKOFF_MS = 5_000;
/** Longest pause between two tries of a held message while the inbox store is unavailable. */
const MAX_STORE_PAUSE_MS = 5_000;
/** How many ids returned to the queue without running this process remembers (see `#returnedUnrun`). */
const RETURNED_UNRUN_KEPT = 10_000;

function storeUnavailable(outcome: Outcome): boolean {
  return outcome.status === 'retry' && outcome.reason === 'store-unavailable';
}

/** True for an error SQS blames on the request (the AWS SDK's `$fault: 'client'`). */
function isClientFault(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { $fault?: unknown }).$fault === 'client';
}

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
 * `mode: 'batch'` (standard queues) each received batch is handled by `handleBatch()` in one transaction. In a FIFO queue (`.fifo`) the messages of one MessageGroupId are handled one
 * at a time in order, groups in parallel; a retried message returns the rest of its group to the queue behind
 * it, so nothing overtakes it.
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
  readonly #deleter: DeleteBatcher;
  /** Messages held (received, not settled) plus those asked for by receives in flight. */
  readonly #buffer: Slots;
  /** Handlers running. */
  readonly #handlers: Slots;
  #started = false;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  /** The DLQ's size limit (its `MaximumMessageSize`, read at start), for picking the dead letter's form. */
  #deadLetterMaxBytes = DEFAULT_MAX_SQS_MESSAGE_BYTES;
  #running = false;
  /** Aborted by `stop()`: ends the back-off pause after a failed receive. */
  readonly #abort = new AbortController();
  /** Aborted by `stop()` when `abortReceiveOnStop`: ends a long poll in flight. */
  readonly #abortReceive = new AbortController();
  /** Aborted by `stop()` first thing: ends a start that is still retrying. */
  readonly #startAbort = new AbortController();
  /** Set once `stop()` gave up waiting: late outcomes are then left to the visibility timeout. */
  #closed = false;
  #pollers: Promise<void>[] = [];
  readonly #tasks = new Set<Promise<unknown>>();
  readonly #groups = new Map<string, Group>();
  /**
   * Ids this process returned to the queue without their handler running (a lock wait, a stop, a FIFO group
   * returned behind a retry): their next receive here is no crash suspect and records no started attempt.
   */
  readonly #returnedUnrun = new Set<string>();
  /** Copies of each message id being handled in this process right now (see `#startHandling`). */
  readonly #inFlight = new Map<string, number>();
  /** The last receive routed once its crash suspects were read (see `#dispatch`), and how many wait. */
  #routed: Promise<void> = Promise.resolve();
  #routesPending = 0;

  constructor(options: SqsConsumerOptions<P, Tx>, config: SqsConsumerConfig) {
    this.#options = options;
    this.#config = config;
    this.#heartbeat = new VisibilityHeartbeat(
      options.client,
      config.queueUrl,
      config.visibilityTimeoutSeconds,
      config.heartbeatIntervalMs,
      config.logger,
    );
    this.#deleter = new DeleteBatcher(
      options.client,
      config.queueUrl,
      {
        delayMs: config.deleteBatchDelayMs,
        maxDelayMs: config.deleteBatchMaxDelayMs,
        // Held messages: waiting for a handler or being handled (a settled one is untracked before its delete).
        unsettled: () => this.#heartbeat.size,
      },
      config.logger,
    );
    this.#buffer = new Slots(config.concurrency + config.prefetch);
    this.#handlers = new Slots(config.concurrency);
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
      // SQS down or unreachable at start (ElasticMQ not up yet, a network blip): keep trying with the receive
      // loop's backoff, as a running consumer does; credentials, access and missing queues reject at once.
      const checked = await retryStart({
        attempt: () =>
          checkQueues(
            client,
            config.queueUrl,
            config.deadLetterQueueUrl,
            handler.config.maxAttempts,
            config.logger,
          ),
        permanent: sqsStartFailure,
        delayMs: (attempt) =>
          Math.min(MAX_POLL_BACKOFF_MS, FIRST_POLL_BACKOFF_MS * 2 ** Math.min(attempt, 30)),
        timeoutMs: config.startTimeoutMs,
        signal: this.#startAbort.signal,
        abandon: () => undefined, // a read of attributes leaves nothing behind
        logger: config.logger,
        what: 'sqsConsumer',
        context: { queueUrl: config.queueUrl },
      });
      if (checked === undefined) return;
      this.#deadLetterMaxBytes = checked.value.deadLetterMaxBytes ?? DEFAULT_MAX_SQS_MESSAGE_BYTES;
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
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      this.#drainTasks().then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), config.closeTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      this.#closed = true;
      config.logger.warn(
        { queueUrl: config.queueUrl, held: this.#heartbeat.size },
        'sqsConsumer stop: handlers still running after closeTimeoutMs; their messages reappear after the visibility timeout',
      );
    }
    await this.#deleter.drain();
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
        await this.#returnAndFree(config, held);
        break;
      }
      this.#dispatch(config, messages, receivedAt);
    }
  }

  async #sleep(ms: number): Promise<void> {
    if (this.#abort.signal.aborted) return;
    await new Promise<void>((resolve) => {
      const signal = this.#abort.signal;
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
    });
  }

  /** Starts holding a received message (heartbeat on); `undefined` for a message SQS sent without a handle. */
  #hold(config: SqsConsumerConfig, raw: Message, receivedAt: number): Held | undefined {
    if (raw.ReceiptHandle === undefined) return undefined;
    let inbound: InboundMessage;
    try {
      inbound = toInboundMessage(raw, config);
    } catch (error) {
      // Only a user's resolveMessageId can throw here: treat it as "no id" so the message is dead-lettered.
      config.logger.error({ error, sqsMessageId: raw.MessageId }, 'sqsConsumer: resolveMessageId threw');
      inbound = toInboundMessage(raw, { ...config, resolveMessageId: () => undefined });
    }
    const receiveCount = Number(raw.Attributes?.ApproximateReceiveCount);
    const held: Held = {
      raw,
      inbound,
      receiveCount: Number.isInteger(receiveCount) && receiveCount > 0 ? receiveCount : 1,
      receiptHandle: raw.ReceiptHandle,
      messageId: raw.MessageId,
      extendedAt: receivedAt,
      extending: undefined,
      suspect: undefined,
    };
    this.#heartbeat.track(held);
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
          this.#track(this.#handleOne(config, held));
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
      for (const { groupId, group } of opened) this.#track(this.#runGroup(config, groupId, group));
      return;
    }
    const held = received.map((r) => r.held);
    // The suspect with the most attempts used first: the one a crash could dead-letter soonest.
    const suspects = held.filter((h) => h.suspect !== undefined).sort((x, y) => y.suspect! - x.suspect!);
    for (const h of suspects) this.#track(this.#handleOne(config, h));
    const together = held.filter((h) => h.suspect === undefined);
    if (config.mode === 'batch') {
      // A chunk never needs more handlers than there are.
      for (let i = 0; i < together.length; i += config.concurrency) {
        this.#track(this.#handleChunk(config, together.slice(i, i + config.concurrency)));
      }
      return;
    }
    for (const h of together) this.#track(this.#handleOne(config, h));
  }

  // ---- settling

  /**
   * Reads which of a receive's redelivered messages are crash suspects (`crashSuspects`, one read for the
   * receive) and marks them; `undefined` when none can be (a first receive, an id this process returned
   * unrun). Never rejects.
   */
  #readSuspects(held: readonly Held[]): Promise<void> | undefined {
    const asked = held.filter(
      (h) => h.receiveCount > 1 && h.inbound.id !== undefined && !this.#returnedUnrun.has(h.inbound.id),
    );
    if (asked.length === 0) return undefined;
    const handler = this.#options.handler;
    return Promise.resolve()
      .then(() => {
        // A wrapper of the consumer that does not forward it: every one may have crashed.
        if (handler.crashSuspects === undefined) throw new Error('no crashSuspects');
        return handler.crashSuspects(asked.map((h) => h.inbound));
      })
      .then(
        (suspects) => {
          for (const h of asked) h.suspect = suspects.get(h.inbound.id!);
        },
        () => {
          // Never rejects by contract; if it does (or throws), every one may have crashed.
          for (const h of asked) h.suspect = 0;
        },
      );
  }

  /**
   * Waits for a free handler (for a crash suspect: for every handler, see `#startHandling`), then handles and
   * settles `held`; when the consumer stops first, returns it to the queue unhandled. Frees its buffer slot
   * either way. Never rejects.
   */
  async #handleOne(config: SqsConsumerConfig, held: Held): Promise<Settlement | 'stopped'> {
    // Of the suspects waiting, the one with the most attempts used goes first (see `#route`).
    const alone = held.suspect !== undefined;
    if (
      !this.#running ||
      !(await (alone ? this.#handlers.acquireAll(held.suspect) : this.#handlers.acquire()))
    ) {
      await this.#returnAndFree(config, [held]);
      return 'stopped';
    }
    try {
      return await this.#settle(config, held);
    } finally {
      this.#handlers.release(alone ? this.#handlers.size : 1);
      this.#buffer.release();
    }
  }

  async #runGroup(config: SqsConsumerConfig, groupId: string, group: Group): Promise<void> {
    try {
      for (let next = group.waiting.shift(); next !== undefined; next = group.waiting.shift()) {
        const result = await this.#handleOne(config, next);
        if (result !== 'settled') {
          // Back in the queue (or will be, or the consumer stops): what waits behind it must not overtake it.
          await this.#returnAndFree(config, group.waiting.splice(0));
        }
      }
    } finally {
      this.#groups.delete(groupId);
    }
  }

  /** Hands `held` to the idempotent consumer and applies the outcome. Never rejects. */
  async #settle(config: SqsConsumerConfig, held: Held): Promise<Settlement> {
    const release = await this.#startHandling(config, [held]);
    let outcome: Outcome;
    try {
      outcome = await this.#options.handler.handle(held.inbound);
      let pauseMs = outcome.status === 'retry' ? Math.max(outcome.delayMs, FIRST_POLL_BACKOFF_MS) : 0;
      // The inbox store is down: keep the message (the heartbeat keeps it hidden) and try again here, rather
      // than hand it back to SQS, where every receive during the outage would raise its receive count towards
      // the redrive policy's limit. Nothing ran, nothing is counted; receives stop while the buffer is full.
      while (storeUnavailable(outcome) && this.#running) {
        await this.#sleep(pauseMs);
        pauseMs = Math.min(MAX_STORE_PAUSE_MS, pauseMs * 2);
        if (!this.#running) break;
        outcome = await this.#options.handler.handle(held.inbound);
      }
    } catch (error) {
      // handle() never rejects by contract; if it does, leave the message to its visibility timeout.
      config.logger.error(
        { error, sqsMessageId: held.messageId },
        'sqsConsumer: handle() rejected; the message will be redelivered',
      );
      await this.#heartbeat.untrack(held);
      return 'returned';
    } finally {
      release();
    }
    return this.#apply(config, held, outcome);
  }

  /**
   * SQS's receive count is no attempt count: it also rises for messages received while the inbox store was
   * down, buffered when a process died, returned at a stop or behind a FIFO retry. So it is not passed to core.
   * A message that kills its process must still reach the DLQ, though: on a redelivery (receive count above
   * 1) a started attempt is recorded in the inbox just before the message runs (one statement for the lot).
   * That is the attempt about to run — the claim counts `max(attempts + 1, started)` — so it costs a message
   * that then runs nothing, and a crash-looping one is charged on each receive after its first death.
   *
   * Charged while others run, every redelivery running at the next crash would be charged again, and a
   * process dying soon after each start would dead-letter healthy messages. So a crash suspect — a
   * redelivery with no inbox row yet, or whose last started attempt has no recorded end (`crashSuspects`,
   * read once per receive) — runs alone: it takes every handler (`Slots.acquireAll`), so it waits until the
   * running handlers have finished and nothing starts beside it until it settles, and it is charged here, one
   * at a time. A crash then charges one suspect at most. The suspects of a receive start before its other
   * messages, the one with the most attempts used first (`#route`): the one a crash could dead-letter soonest.
   * A plain retry (its failure is on record) is no suspect: its charge is neutral and it runs beside the
   * others. Marks the ids of `held` in hand until the returned function is called.
   */
  async #startHandling(config: SqsConsumerConfig, held: readonly Held[]): Promise<() => void> {
    const starting: InboundMessage[] = [];
    const ids: string[] = [];
    for (const h of held) {
      const id = h.inbound.id;
      if (id === undefined) continue;
      const unrun = this.#returnedUnrun.delete(id);
      // One record per id in hand, not per copy: a process that died holding several copies of an id (producer
      // duplicates) returns them all, and each copy's record would count one more attempt before any claim.
      if (h.receiveCount > 1 && !unrun && !this.#inFlight.has(id)) starting.push(h.inbound);
      // In hand from now on (before the record's round trip, so a copy received meanwhile sees it).
      this.#inFlight.set(id, (this.#inFlight.get(id) ?? 0) + 1);
      ids.push(id);
    }
    const release = (): void => {
      for (const id of ids) {
        const n = (this.#inFlight.get(id) ?? 1) - 1;
        if (n <= 0) this.#inFlight.delete(id);
        else this.#inFlight.set(id, n);
      }
    };
    if (starting.length === 0) return release;
    try {
      await this.#options.handler.recordAttemptsStarted(starting);
    } catch (error) {
      // The store is down: the claim meets it too and the message waits (see #settle).
      config.logger.warn({ error, count: starting.length }, 'sqsConsumer: could not record started attempts');
    }
    return release;
  }

  /** Remembers that `ids` go back to the queue without having run here (bounded, oldest forgotten first). */
  #rememberUnrun(ids: readonly (string | undefined)[]): void {
    for (const id of ids) {
      if (id === undefined) continue;
      if (this.#returnedUnrun.size >= RETURNED_UNRUN_KEPT)
        this.#returnedUnrun.delete(this.#returnedUnrun.values().next().value!);
      this.#returnedUnrun.add(id);
    }
  }

  /**
   * Batch mode: waits for handlers for the whole chunk, hands it to `handleBatch` (one transaction), then
   * applies each outcome. Returns the chunk to the queue unhandled when the consumer stops first. Frees the
   * chunk's buffer slots either way. Never rejects.
   */
  async #handleChunk(config: SqsConsumerConfig, chunk: readonly Held[]): Promise<void> {
    if (!this.#running || !(await this.#handlers.acquire(chunk.length))) {
      await this.#returnAndFree(config, chunk);
      return;
    }
    try {
      let outcomes: Outcome[];
      const release = await this.#startHandling(config, chunk);
      try {
        outcomes = await this.#options.handler.handleBatch(chunk.map((h) => h.inbound));
        // The inbox store is down: keep those messages and try them again here (see #settle).
        let pauseMs = FIRST_POLL_BACKOFF_MS;
        for (;;) {
          const waiting = chunk.flatMap((_, i) => (storeUnavailable(outcomes[i]!) ? [i] : []));
          if (waiting.length === 0 || !this.#running) break;
          await this.#sleep(
            Math.max(pauseMs, ...waiting.map((i) => (outcomes[i] as { delayMs: number }).delayMs)),
          );
          pauseMs = Math.min(MAX_STORE_PAUSE_MS, pauseMs * 2);
          if (!this.#running) break;
          const again = await this.#options.handler.handleBatch(waiting.map((i) => chunk[i]!.inbound));
          waiting.forEach((i, k) => (outcomes[i] = again[k]!));
        }
      } catch (error) {
        config.logger.error(
          { error, count: chunk.length },
          'sqsConsumer: handleBatch() rejected; the messages will be redelivered',
        );
        for (const h of chunk) await this.#heartbeat.untrack(h);
        return;
      } finally {
        release();
      }
      await Promise.all(chunk.map((h, i) => this.#apply(config, h, outcomes[i]!)));
    } finally {
      this.#handlers.release(chunk.length);
      this.#buffer.release(chunk.length);
    }
  }

  /** Maps one outcome to SQS. Never rejects. */
  async #apply(config: SqsConsumerConfig, held: Held, outcome: Outcome): Promise<Settlement> {
    if (this.#closed) {
      await this.#heartbeat.untrack(held);
      return 'returned';
    }
    switch (outcome.status) {
      case 'processed':
      case 'duplicate':
        await this.#heartbeat.untrack(held);
        this.#deleter.enqueue(held);
        return 'settled';
      case 'retry':
        if (outcome.reason !== 'handler-error') this.#rememberUnrun([held.inbound.id]);
        await this.#heartbeat.untrack(held);
        await this.#changeVisibility(
          config,
          held,
          Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(outcome.delayMs / 1000)),
        );
        return 'returned';
      case 'dead-letter':
        if (!(await this.#sendDeadLetter(config, held, outcome))) {
          await this.#heartbeat.untrack(held);
          return 'returned';
        }
        await this.#heartbeat.untrack(held);
        this.#deleter.enqueue(held);
        return 'settled';
    }
  }

  /**
   * Sends the dead letter in the largest form (`DeadLetterForm`) that fits the DLQ's size limit; when SQS
   * refuses it as a request error (too large, most likely), in the next smaller form. False when it is not in
   * the DLQ: the source message must then stay.
   */
  async #sendDeadLetter(config: SqsConsumerConfig, held: Held, outcome: DeadLetterOutcome): Promise<boolean> {
    const name = this.#options.handler.name;
    const last = DEAD_LETTER_FORMS.length - 1;
    const result = await sendInFittingForm(DEAD_LETTER_FORMS, async (form, i) => {
      const input = deadLetterMessage(config.deadLetterQueueUrl, name, held.inbound, held.raw, outcome, form);
      // A form over the limit is not worth a round trip, unless it is the last one left: a queue may allow more.
      if (i < last && sqsMessageBytes(input) > this.#deadLetterMaxBytes) {
        return {
          status: 'too-large',
          error: new Error(`the ${form} dead letter is over ${this.#deadLetterMaxBytes} bytes`),
        };
      }
      try {
        await this.#options.client.send(new SendMessageCommand(input));
        return { status: 'sent' };
      } catch (error) {
        return { status: isClientFault(error) ? 'too-large' : 'failed', error };
      }
    });
    if (result.status === 'sent') {
      if (result.form !== 'full') {
        config.logger.warn(
          { messageId: outcome.messageId, form: result.form, deadLetterQueueUrl: config.deadLetterQueueUrl },
          'sqsConsumer: the dead letter was too large with every attribute; sent in a smaller form',
        );
      }
      return true;
    }
    config.logger.error(
      { error: result.error, messageId: outcome.messageId, deadLetterQueueUrl: config.deadLetterQueueUrl },
      'sqsConsumer: sending to the dead-letter queue failed; the message stays and is redelivered after its visibility timeout',
    );
    return false;
  }

  async #changeVisibility(config: SqsConsumerConfig, held: Held, seconds: number): Promise<void> {
    try {
      await this.#options.client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: config.queueUrl,
          ReceiptHandle: held.receiptHandle,
          VisibilityTimeout: seconds,
        }),
      );
    } catch (error) {
      config.logger.warn(
        { error, sqsMessageId: held.messageId, visibilityTimeoutSeconds: seconds },
        'sqsConsumer: could not set the retry delay; the message returns after its current visibility timeout',
      );
    }
  }

  async #returnAndFree(config: SqsConsumerConfig, held: readonly Held[]): Promise<void> {
    try {
      await this.#returnToQueue(config, held);
    } finally {
      this.#buffer.release(held.length);
    }
  }

  /** Makes messages visible again at once (they were not handled). Never rejects. */
  async #returnToQueue(config: SqsConsumerConfig, held: readonly Held[]): Promise<void> {
    this.#rememberUnrun(held.map((h) => h.inbound.id));
    for (const h of held) await this.#heartbeat.untrack(h);
    if (this.#closed) return;
    for (let i = 0; i < held.length; i += 10) {
      const batch = held.slice(i, i + 10);
      try {
        const result = await this.#options.client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: config.queueUrl,
            Entries: batch.map((h, n) => ({
              Id: String(n),
              ReceiptHandle: h.receiptHandle,
              VisibilityTimeout: 0,
            })),
          }),
        );
        if ((result.Failed ?? []).length > 0) {
          config.logger.warn(
            { failed: result.Failed },
            'sqsConsumer: some messages could not be returned; they reappear after their visibility timeout',
          );
        }
      } catch (error) {
        config.logger.warn(
          { error },
          'sqsConsumer: messages could not be returned; they reappear after their visibility timeout',
        );
      }
    }
  }
}
