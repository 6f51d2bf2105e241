// The learning transport: drives an IdempotentConsumer from the in-memory LearningBroker, maps outcomes to
// the broker's actions exactly as a real transport does (ack, delayed retry, DLQ with the documented headers)
// and injects crashes at each seam. Single-process only: for demos and for users' unit tests, never for
// production (nothing is persisted).

import { abortableSleep, DeliveryGuard, settle, silentLogger } from '@inboxkit/core';
import type { DeadLetterEntry, GuardedOutcome, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';

import { crashableConsumer } from './crashable-consumer.js';
import type { CrashableConsumer } from './crashable-consumer.js';
import type { CrashSeam } from './crash-signal.js';
import { LearningBroker } from './learning-broker.js';
import { LEARNING_TRANSPORT_FEATURES, LearningSettlement } from './learning-settlement.js';
import type {
  InjectCrashOptions,
  LearningBrokerStats,
  LearningDelivery,
  LearningMessage,
  LearningReplayOptions,
  LearningReplayResult,
} from './learning-broker.js';

/** Options of `LearningTransport`. */
export interface LearningTransportOptions<P, Tx> {
  /** The consumer the transport feeds. */
  readonly consumer: IdempotentConsumer<P, Tx>;
  /** The queue to consume. Default is a new `LearningBroker` (with `visibilityTimeoutMs` and `queue`). */
  readonly broker?: LearningBroker;
  /** Name of the new broker's queue, when `broker` is not given. Default is a `uniqueName('learning')`. */
  readonly queue?: string;
  /** Visibility timeout of the new broker, when `broker` is not given. Default is 1,000 ms. */
  readonly visibilityTimeoutMs?: number;
  /** Deliveries handled at once. Messages sharing a key are still handled one at a time. Default is 1. */
  readonly concurrency?: number;
  /** How long `stop()` waits for running handlers before it gives their deliveries up. Default is 10,000 ms. */
  readonly closeTimeoutMs?: number;
}

const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;

/**
 * An in-memory at-least-once transport for demos and unit tests (single process; nothing survives it). It
 * acks `processed`/`duplicate`, redelivers `retry` after its `delayMs` with a rising `deliveryCount`, moves
 * `dead-letter` to an in-memory DLQ with `deadLetterHeaders()`, replays dead letters with a replay marker,
 * delivers duplicates and reorders on demand, and injects crashes at each seam:
 *
 * - `before-handler`: the delivery is lost before `handle()` runs;
 * - `after-handler-before-commit`: the handler ran, then the transaction rolls back (see `CrashSignal`);
 * - `after-commit-before-ack`: the outcome is durable, but the ack is lost.
 *
 * A lost delivery is delivered again after the broker's visibility timeout, as after a process death.
 *
 * @example
 * const transport = new LearningTransport({ consumer, visibilityTimeoutMs: 20 });
 * await transport.start();
 * transport.injectCrash('after-handler-before-commit', { id: 'o-1' });
 * await transport.send([{ id: 'o-1', body: JSON.stringify({ total: 5 }) }]);
 * await transport.drain();
 * expect(await countOrders()).toBe(1);
 * await transport.stop();
 */
export class LearningTransport<P = unknown, Tx = unknown> implements TransportConsumer {
  readonly broker: LearningBroker;
  readonly consumer: IdempotentConsumer<P, Tx>;
  /** Errors `handle()` rejected with (a bug in core or a store): those deliveries were given up. */
  readonly errors: unknown[] = [];
  readonly #crashable: CrashableConsumer;
  readonly #concurrency: number;
  readonly #closeTimeoutMs: number;
  readonly #running = new Set<Promise<void>>();
  readonly #deliveries = new Set<LearningDelivery>();
  #unsubscribe: (() => void) | undefined;
  #state: 'new' | 'running' | 'stopped' | 'crashed' = 'new';
  /** Aborted by `stop()` or a crash: ends a pause of the outage policy. */
  readonly #stopped = new AbortController();
  /** The learning broker's verbs, driven by core's `settle()`. */
  readonly #port: LearningSettlement;
  readonly #guard: DeliveryGuard;

  constructor(options: LearningTransportOptions<P, Tx>) {
    this.consumer = options.consumer;
    this.broker =
      options.broker ??
      new LearningBroker({
        ...(options.queue !== undefined ? { name: options.queue } : {}),
        ...(options.visibilityTimeoutMs !== undefined
          ? { visibilityTimeoutMs: options.visibilityTimeoutMs }
          : {}),
      });
    this.#crashable = crashableConsumer(options.consumer);
    this.#port = new LearningSettlement(options.consumer.name);
    // The broker's delivery count reaches core and rises on each redelivery: a store outage is held here.
    this.#guard = new DeliveryGuard({
      consumer: {
        handle: (m) => this.#crashable.handle(m),
        handleBatch: (ms) => options.consumer.handleBatch(ms),
      },
      features: LEARNING_TRANSPORT_FEATURES,
      running: () => this.#state === 'running',
      sleep: (ms) => abortableSleep(ms, this.#stopped.signal),
    });
    this.#concurrency = options.concurrency ?? 1;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
    if (!(Number.isInteger(this.#concurrency) && this.#concurrency >= 1))
      throw new RangeError('concurrency must be an integer ≥ 1');
  }

  /** Starts taking deliveries. Resolves at once; a stopped transport cannot be started again. */
  async start(): Promise<void> {
    if (this.#state === 'running') return;
    if (this.#state !== 'new')
      throw new Error(`LearningTransport: cannot start a ${this.#state} transport; create a new one`);
    this.#state = 'running';
    this.#unsubscribe = this.broker.subscribe({
      capacity: () => (this.#state === 'running' ? this.#concurrency - this.#deliveries.size : 0),
      deliver: (delivery) => this.#accept(delivery),
      crashed: () => {
        this.#state = 'crashed';
        this.#unsubscribe = undefined;
        this.#stopped.abort();
      },
    });
  }

  /**
   * Stops taking deliveries, waits for running handlers up to the close timeout and settles what finished;
   * deliveries still running then are given up (delivered again after the visibility timeout). Safe to call
   * twice. After `crash()` it resolves at once.
   */
  async stop(): Promise<void> {
    if (this.#state === 'crashed') return;
    this.#state = 'stopped';
    this.#stopped.abort();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    if (this.#running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#closeTimeoutMs);
    });
    const result = await Promise.race([Promise.all([...this.#running]).then(() => 'done' as const), timeout]);
    clearTimeout(timer);
    if (result === 'timeout') for (const d of this.#deliveries) d.abandon('stop-timeout');
  }

  /** Sends messages to this transport's queue. */
  send(messages: readonly LearningMessage[]): Promise<void> {
    return this.broker.send(messages);
  }

  /** Delivers `times` more copies of the message sent with `id`. See `LearningBroker.duplicate`. */
  duplicate(id: string, times = 1): number {
    return this.broker.duplicate(id, times);
  }

  /** Shuffles waiting messages, keeping per-key order. See `LearningBroker.reorder`. */
  reorder(random?: () => number): void {
    this.broker.reorder(random);
  }

  /** Arms a crash at `seam`. See `LearningBroker.injectCrash`. */
  injectCrash(seam: CrashSeam, options?: InjectCrashOptions): void {
    this.broker.injectCrash(seam, options);
  }

  /** The DLQ's content. */
  deadLetters(): DeadLetterEntry[] {
    return this.broker.deadLetters();
  }

  /** Republishes dead letters with a replay marker and their original id. */
  replayDeadLetters(options?: LearningReplayOptions): Promise<LearningReplayResult> {
    return this.broker.replayDeadLetters(options);
  }

  /** Resolves once everything sent was acked or dead-lettered. See `LearningBroker.drain`. */
  drain(options?: { readonly timeoutMs?: number }): Promise<void> {
    return this.broker.drain(options);
  }

  /** Resolves once nothing runs and nothing is deliverable right now. See `LearningBroker.whenIdle`. */
  whenIdle(options?: { readonly timeoutMs?: number }): Promise<void> {
    return this.broker.whenIdle(options);
  }

  /** Counters of the broker this transport consumes. */
  get stats(): LearningBrokerStats {
    return this.broker.stats;
  }

  #accept(delivery: LearningDelivery): void {
    this.#deliveries.add(delivery);
    const run = this.#process(delivery).finally(() => {
      this.#deliveries.delete(delivery);
      this.#running.delete(run);
      delivery.finish();
    });
    this.#running.add(run);
  }

  async #process(delivery: LearningDelivery): Promise<void> {
    if (delivery.takeCrash('before-handler')) {
      delivery.abandon('before-handler');
      return;
    }
    let outcome: GuardedOutcome;
    if (delivery.takeCrash('after-handler-before-commit')) {
      const attempt = await this.#crashable
        .handleCrashingAfterHandler(delivery.message)
        .catch((error: unknown) => ({
          crashed: false as const,
          outcome: { status: 'rejected' as const, error },
        }));
      if (attempt.crashed) {
        delivery.abandon('after-handler-before-commit');
        return;
      }
      delivery.returnCrash('after-handler-before-commit');
      outcome = attempt.outcome;
    } else {
      outcome = await this.#guard.handle(delivery.message);
    }
    // A crash() while the handler ran: this process is "dead", its outcome goes nowhere.
    if (!delivery.active) return;
    // handle() never rejects for a message's or the store's fault, so this is a bug: the message is kept.
    if (outcome.status === 'rejected') this.errors.push(outcome.error);
    else delivery.recordOutcome(outcome.status);
    if (delivery.takeCrash('after-commit-before-ack')) {
      delivery.abandon('after-commit-before-ack');
      return;
    }
    await settle(this.#port, delivery, outcome, { logger: silentLogger, what: 'LearningTransport' });
  }
}
