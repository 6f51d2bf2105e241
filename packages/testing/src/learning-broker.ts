// The queue behind the learning transport: an in-memory, single-process, at-least-once broker. It keeps
// messages until they are acked or dead-lettered, redelivers what a crash or a retry left behind, delivers
// duplicates and reorders on demand, and holds armed crashes for the transport to inject. It is meant for
// demos and unit tests, like NServiceBus's learning transport: nothing survives the process.

import { HEADERS, MessageTooLargeError, parseReplayMarker, replayHeaders } from '@inboxkit/core';
import type { DeadLetterEntry, InboundMessage, OutcomeStatus } from '@inboxkit/core';

import type { CrashSeam } from './crash-signal.js';
import { uniqueName } from './unique-name.js';

/** One message to send to the learning broker. */
export interface LearningMessage {
  /** Written as the `message-id` header. Omit it to see a `missing-id` dead letter. */
  readonly id?: string;
  /** The raw body; core decodes it (JSON by default). */
  readonly body: string | Uint8Array | null;
  readonly headers?: Readonly<Record<string, string>>;
  /** Ordering key: messages sharing a key are delivered one at a time, in send order. */
  readonly key?: string;
  readonly timestamp?: Date;
}

/** Options of `LearningBroker`. */
export interface LearningBrokerOptions {
  /** The queue's name, used as `source.destination`. Default is a `uniqueName('learning')`. */
  readonly name?: string;
  /**
   * How long a delivery that was lost (a crash, or a handler still running when `stop()` gave up) stays
   * invisible before it is delivered again, like SQS's visibility timeout. Default is 1,000 ms.
   */
  readonly visibilityTimeoutMs?: number;
  /**
   * The largest dead letter the DLQ takes, in bytes (the body plus every header's name and value): a larger one
   * is refused with a `MessageTooLargeError`, as a real broker refuses a copy over its limit, and the delivery
   * stays unsettled. Default is no limit.
   *
   * @example
   * new LearningBroker({ maxDeadLetterBytes: 13_000 });
   */
  readonly maxDeadLetterBytes?: number;
}

/** Options of `LearningDelivery.deadLetter`. */
export interface LearningDeadLetterOptions {
  /** Whether the message's own headers travel with the dead letter. Default is true. */
  readonly originalHeaders?: boolean;
}

/** Options of `injectCrash`. */
export interface InjectCrashOptions {
  /** Crash only deliveries of this message id. Default: the next delivery that reaches the seam. */
  readonly id?: string;
  /** How many deliveries crash. Default is 1. */
  readonly times?: number;
}

/** Options of `replayDeadLetters`. */
export interface LearningReplayOptions {
  /** The replay run's id (a dead letter is reopened once per replay id). Default is a `uniqueName('replay')`. */
  readonly replayId?: string;
  /** Recorded in the replay audit. Default is `learning-transport`. */
  readonly requestedBy?: string;
  /** Replays only the entries this returns true for. Default: all. */
  readonly filter?: (entry: DeadLetterEntry) => boolean;
  /** Replays at most this many. Default: all. */
  readonly limit?: number;
}

/** What `replayDeadLetters` did. */
export interface LearningReplayResult {
  readonly replayId: string;
  /** Original ids republished to the source, in DLQ order. */
  readonly replayed: readonly string[];
  /** Entries left in the DLQ because they have no original id (a replay could only dead-letter them again). */
  readonly skipped: readonly DeadLetterEntry[];
}

/** Counters of everything the broker did. A fresh object on every read. */
export interface LearningBrokerStats {
  readonly sent: number;
  /** Every delivery to a handler, first ones and redeliveries. */
  readonly delivered: number;
  /** Deliveries of a message that had been delivered before (after a retry or a lost delivery). */
  readonly redelivered: number;
  /** First deliveries of an extra copy of an id already sent (`duplicate()`, or `send` of a known id). */
  readonly duplicatesDelivered: number;
  readonly acked: number;
  /** Retry outcomes scheduled with their delay. */
  readonly retried: number;
  readonly deadLettered: number;
  readonly replayed: number;
  /** Outcomes obtained from the consumer, by status (also those whose ack was then lost to a crash). */
  readonly outcomes: Readonly<Record<OutcomeStatus, number>>;
  /** Crashes injected, by seam. */
  readonly crashes: Readonly<Record<CrashSeam, number>>;
  /** `crash()` calls: simulated deaths of every consuming process. */
  readonly processCrashes: number;
  /** Deliveries given up by `stop()` after its close timeout, or because `handle()` rejected. */
  readonly abandoned: number;
}

/**
 * One delivery handed to a subscriber. Exactly one of `ack`, `retry`, `deadLetter` or `abandon` settles it;
 * `finish` is called when the subscriber's work on it ended, whatever happened.
 */
export interface LearningDelivery {
  readonly message: InboundMessage;
  /** False once the delivery was lost (a crash, or abandoned): its outcome must then be discarded. */
  readonly active: boolean;
  ack(): void;
  retry(delayMs: number): void;
  /**
   * Moves the message to the DLQ with these headers (added to the message's own, unless
   * `originalHeaders: false`). Throws a `MessageTooLargeError`, settling nothing, when the copy is over the
   * broker's `maxDeadLetterBytes`.
   */
  deadLetter(headers: Readonly<Record<string, string>>, options?: LearningDeadLetterOptions): void;
  /** Loses the delivery: the message becomes visible again after the visibility timeout. */
  abandon(cause: CrashSeam | 'stop-timeout' | 'error'): void;
  recordOutcome(status: OutcomeStatus): void;
  /** Consumes one armed crash for this seam and this message, if any. */
  takeCrash(seam: CrashSeam): boolean;
  /** Puts back a crash taken by `takeCrash` that could not fire (the handler never returned normally). */
  returnCrash(seam: CrashSeam): void;
  finish(): void;
}

/** What the broker delivers to: a learning transport consumer. */
export interface LearningSubscriber {
  /** How many more deliveries it takes now. */
  capacity(): number;
  deliver(delivery: LearningDelivery): void;
  /** Called by `crash()`: the subscriber's process is dead; it must take nothing more. */
  crashed(): void;
}

interface Queued {
  readonly seq: number;
  readonly id: string | undefined;
  readonly body: string | Uint8Array | null;
  readonly headers: Readonly<Record<string, string>>;
  readonly key: string | undefined;
  readonly timestamp: Date | undefined;
  readonly isDuplicateCopy: boolean;
  deliveryCount: number;
  visibleAt: number;
  receipt: number;
  inFlight: boolean;
}

interface DeadLetter {
  readonly entry: DeadLetterEntry;
  readonly key: string | undefined;
}

interface ArmedCrash {
  readonly seam: CrashSeam;
  readonly id: string | undefined;
  remaining: number;
}

type Mutable<T> = {
  -readonly [K in keyof T]: T[K] extends object ? { -readonly [J in keyof T[K]]: T[K][J] } : T[K];
};

const DEFAULT_VISIBILITY_TIMEOUT_MS = 1_000;
const DEFAULT_WAIT_TIMEOUT_MS = 10_000;
/** Dead-letter facts and replay markers: not copied from a message into its dead letter or its replay. */
const INBOXKIT_HEADER = /^x-inboxkit-/;

/**
 * An in-memory at-least-once queue with a DLQ. Usually created by `LearningTransport`; create one yourself to
 * attach several consumers to one queue (a restart, a competing consumer).
 *
 * @example
 * const broker = new LearningBroker({ visibilityTimeoutMs: 50 });
 * const first = new LearningTransport({ consumer, broker });
 * await first.start();
 * await broker.send([{ id: 'o-1', body: '{}' }]);
 * await broker.drain();
 */
export class LearningBroker {
  readonly name: string;
  readonly visibilityTimeoutMs: number;
  readonly maxDeadLetterBytes: number;
  readonly #queue: Queued[] = [];
  readonly #dlq: DeadLetter[] = [];
  readonly #sentIds = new Map<string, LearningMessage>();
  readonly #subscribers = new Set<LearningSubscriber>();
  readonly #crashes: ArmedCrash[] = [];
  readonly #waiters = new Set<() => void>();
  readonly #stats: Mutable<LearningBrokerStats> = {
    sent: 0,
    delivered: 0,
    redelivered: 0,
    duplicatesDelivered: 0,
    acked: 0,
    retried: 0,
    deadLettered: 0,
    replayed: 0,
    outcomes: { processed: 0, duplicate: 0, retry: 0, 'dead-letter': 0 },
    crashes: { 'before-handler': 0, 'after-handler-before-commit': 0, 'after-commit-before-ack': 0 },
    processCrashes: 0,
    abandoned: 0,
  };
  #seq = 0;
  #dlqSeq = 0;
  #openDeliveries = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  #pumpScheduled = false;
  #closed = false;

  constructor(options: LearningBrokerOptions = {}) {
    this.name = options.name ?? uniqueName('learning');
    this.visibilityTimeoutMs = options.visibilityTimeoutMs ?? DEFAULT_VISIBILITY_TIMEOUT_MS;
    if (!(this.visibilityTimeoutMs >= 0)) throw new RangeError('visibilityTimeoutMs must be ≥ 0');
    this.maxDeadLetterBytes = options.maxDeadLetterBytes ?? Infinity;
    if (!(this.maxDeadLetterBytes > 0)) throw new RangeError('maxDeadLetterBytes must be > 0');
  }

  /** Counters of deliveries, outcomes, crashes and settlements. */
  get stats(): LearningBrokerStats {
    return { ...this.#stats, outcomes: { ...this.#stats.outcomes }, crashes: { ...this.#stats.crashes } };
  }

  /** Messages not yet acked or dead-lettered (waiting, delayed or in flight). */
  get size(): number {
    return this.#queue.length;
  }

  /** Enqueues messages in order. Sending an id that was sent before is a producer-side duplicate. */
  async send(messages: readonly LearningMessage[]): Promise<void> {
    for (const message of messages)
      this.#enqueue(message, message.id !== undefined && this.#sentIds.has(message.id));
    this.#stats.sent += messages.length;
    this.#schedulePump();
  }

  /**
   * Enqueues `times` more copies of the last message sent with `id`, as a producer retrying its publish would.
   * Returns how many copies were added.
   */
  duplicate(id: string, times = 1): number {
    const message = this.#sentIds.get(id);
    if (!message)
      throw new Error(`LearningBroker.duplicate: no message with id ${JSON.stringify(id)} was sent`);
    for (let i = 0; i < times; i++) this.#enqueue(message, true);
    this.#schedulePump();
    return times;
  }

  /**
   * Shuffles the waiting messages, keeping the relative order of messages that share a key (the ordering the
   * broker promises). `random` returns numbers in [0, 1); pass a seeded one for a reproducible order.
   */
  reorder(random: () => number = Math.random): void {
    const shuffled = [...this.#queue];
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
    }
    // Put each key's messages back into the slots the shuffle gave that key, in their original order.
    const byKey = new Map<string, Queued[]>();
    for (const m of this.#queue) if (m.key !== undefined) byKey.set(m.key, [...(byKey.get(m.key) ?? []), m]);
    const next = shuffled.map((m) => (m.key === undefined ? m : byKey.get(m.key)!.shift()!));
    this.#queue.splice(0, this.#queue.length, ...next);
  }

  /**
   * Arms a crash at `seam` for the next delivery (of `options.id`, if given) that reaches it; `times` arms it
   * for that many deliveries. A crash loses the delivery: the message is delivered again after the
   * visibility timeout.
   *
   * @example
   * broker.injectCrash('after-commit-before-ack', { id: 'o-1' }); // committed, but the ack is lost
   */
  injectCrash(seam: CrashSeam, options: InjectCrashOptions = {}): void {
    const times = options.times ?? 1;
    if (!(times >= 1)) throw new RangeError('times must be ≥ 1');
    this.#crashes.push({ seam, id: options.id, remaining: times });
  }

  /** Armed crashes that have not fired yet. */
  get pendingCrashes(): number {
    return this.#crashes.reduce((n, c) => n + c.remaining, 0);
  }

  /** The DLQ's content, oldest first. Each entry's headers are the message's own plus `deadLetterHeaders()`. */
  deadLetters(): DeadLetterEntry[] {
    return this.#dlq.map((d) => d.entry);
  }

  /** Removes one dead letter by its `position`. Returns false when it is no longer there. */
  removeDeadLetter(position: string): boolean {
    const i = this.#dlq.findIndex((d) => d.entry.position === position);
    if (i < 0) return false;
    this.#dlq.splice(i, 1);
    this.#changed();
    return true;
  }

  /**
   * Resolves with the DLQ's content once it holds at least `count` entries. Rejects after `timeoutMs` (default
   * 10,000 ms) with the broker's state.
   */
  async waitForDeadLetters(
    count: number,
    options: { readonly timeoutMs?: number } = {},
  ): Promise<DeadLetterEntry[]> {
    await this.#waitUntil(() => this.#dlq.length >= count, `waitForDeadLetters(${count})`, options.timeoutMs);
    return this.deadLetters();
  }

  /**
   * Moves dead letters back to the queue with their original id and a replay marker (`replayHeaders`), as
   * `inboxkit dlq replay` does: the inbox then reopens a dead-lettered id once and skips a completed one.
   */
  async replayDeadLetters(options: LearningReplayOptions = {}): Promise<LearningReplayResult> {
    const replayId = options.replayId ?? uniqueName('replay');
    const marker = replayHeaders({
      replayId,
      requestedBy: options.requestedBy ?? 'learning-transport',
      requestedAt: new Date(),
    });
    const replayed: string[] = [];
    const skipped: DeadLetterEntry[] = [];
    const limit = options.limit ?? Infinity;
    for (const dead of [...this.#dlq]) {
      if (replayed.length >= limit) break;
      if (options.filter && !options.filter(dead.entry)) continue;
      const id = dead.entry.headers[HEADERS.originalId] ?? dead.entry.id;
      if (id === undefined) {
        skipped.push(dead.entry);
        continue;
      }
      this.#dlq.splice(this.#dlq.indexOf(dead), 1);
      const headers = withoutInboxkitHeaders(dead.entry.headers);
      this.#enqueue({ id, body: dead.entry.body, headers: { ...headers, ...marker }, key: dead.key }, false);
      replayed.push(id);
    }
    this.#stats.replayed += replayed.length;
    this.#schedulePump();
    return { replayId, replayed, skipped };
  }

  /**
   * Resolves once every message sent so far was acked or dead-lettered and no handler is running (also none
   * orphaned by `crash()`). Waits through retries and redeliveries. Rejects after `timeoutMs` with the state.
   * Default timeout is 10,000 ms.
   */
  drain(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    return this.#waitUntil(
      () => this.#queue.length === 0 && this.#openDeliveries === 0,
      'drain',
      options.timeoutMs,
    );
  }

  /**
   * Resolves once no handler is running and nothing can be delivered right now: the queue is empty, or every
   * message waits for a delay or a visibility timeout, or no consumer is running. Default timeout is 10,000 ms.
   */
  whenIdle(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    return this.#waitUntil(
      () =>
        this.#openDeliveries === 0 &&
        (this.#subscribers.size === 0 || this.#eligible(Date.now()).length === 0),
      'whenIdle',
      options.timeoutMs,
    );
  }

  /**
   * Simulates the death of every consuming process: every delivery in flight is lost without being settled
   * (redelivered after the visibility timeout) and every attached consumer stops taking messages. Handlers
   * already running finish in the background; their outcomes are discarded.
   */
  crash(): void {
    this.#stats.processCrashes += 1;
    const now = Date.now();
    for (const m of this.#queue) {
      if (!m.inFlight) continue;
      m.inFlight = false;
      m.receipt += 1;
      m.visibleAt = now + this.visibilityTimeoutMs;
    }
    const subscribers = [...this.#subscribers];
    this.#subscribers.clear();
    for (const s of subscribers) s.crashed();
    this.#changed();
  }

  /** Attaches a consumer; returns the function that detaches it. Used by `LearningTransport`. */
  subscribe(subscriber: LearningSubscriber): () => void {
    if (this.#closed) throw new Error('LearningBroker is closed');
    this.#subscribers.add(subscriber);
    this.#schedulePump();
    return () => {
      this.#subscribers.delete(subscriber);
      this.#changed();
    };
  }

  /** Cancels the broker's timer and detaches every consumer. Messages stay readable. */
  close(): void {
    this.#closed = true;
    this.#subscribers.clear();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** A readable dump of the queue, for failure messages. */
  describe(): string {
    const now = Date.now();
    const lines = this.#queue.map((m) => {
      const state = m.inFlight
        ? 'in flight'
        : m.visibleAt > now
          ? `invisible for ${m.visibleAt - now} ms`
          : 'ready';
      return `  ${JSON.stringify(m.id ?? null)}${m.key === undefined ? '' : ` key ${m.key}`}: ${state}, ${m.deliveryCount} deliveries`;
    });
    return [
      `queue ${this.name}: ${this.#queue.length} messages, ${this.#openDeliveries} handlers running, ${this.#subscribers.size} consumers, ${this.#dlq.length} dead letters`,
      ...lines.slice(0, 20),
      ...(lines.length > 20 ? [`  … ${lines.length - 20} more`] : []),
    ].join('\n');
  }

  #enqueue(message: LearningMessage, isDuplicateCopy: boolean): void {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(message.headers ?? {})) headers[k.toLowerCase()] = v;
    if (message.id !== undefined) {
      headers[HEADERS.messageId] = message.id;
      this.#sentIds.set(message.id, message);
    }
    this.#seq += 1;
    this.#queue.push({
      seq: this.#seq,
      id: message.id,
      body: message.body,
      headers,
      key: message.key,
      timestamp: message.timestamp,
      isDuplicateCopy,
      deliveryCount: 0,
      visibleAt: 0,
      receipt: 0,
      inFlight: false,
    });
  }

  /** Messages that may be delivered now: visible, not in flight, and first of their key. */
  #eligible(now: number): Queued[] {
    const blockedKeys = new Set<string>();
    const ready: Queued[] = [];
    for (const m of this.#queue) {
      if (m.key !== undefined) {
        if (blockedKeys.has(m.key)) continue;
        blockedKeys.add(m.key);
      }
      if (!m.inFlight && m.visibleAt <= now) ready.push(m);
    }
    return ready;
  }

  #schedulePump(): void {
    if (this.#pumpScheduled || this.#closed) return;
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#closed) return;
    const now = Date.now();
    const ready = this.#eligible(now);
    let progress = true;
    while (ready.length > 0 && progress) {
      progress = false;
      for (const subscriber of this.#subscribers) {
        if (ready.length === 0) break;
        if (subscriber.capacity() <= 0) continue;
        subscriber.deliver(this.#lease(ready.shift()!));
        progress = true;
      }
    }
    this.#armTimer(now);
    this.#notify();
  }

  #armTimer(now: number): void {
    let next = Infinity;
    for (const m of this.#queue) if (!m.inFlight && m.visibleAt > now) next = Math.min(next, m.visibleAt);
    if (next === this.#timerAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = next;
    if (next === Infinity) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#pump();
    }, next - now);
  }

  #lease(m: Queued): LearningDelivery {
    m.inFlight = true;
    m.deliveryCount += 1;
    m.receipt += 1;
    const receipt = m.receipt;
    this.#openDeliveries += 1;
    this.#stats.delivered += 1;
    if (m.deliveryCount > 1) this.#stats.redelivered += 1;
    else if (m.isDuplicateCopy) this.#stats.duplicatesDelivered += 1;

    const message: InboundMessage = {
      id: m.id,
      body: m.body,
      headers: m.headers,
      ...(m.timestamp ? { timestamp: m.timestamp } : {}),
      deliveryCount: m.deliveryCount,
      ...(parseReplayMarker(m.headers) ? { replay: parseReplayMarker(m.headers)! } : {}),
      source: {
        transport: 'memory',
        destination: this.name,
        offset: String(m.seq),
        brokerMessageId: `${m.seq}.${m.deliveryCount}`,
      },
    };
    let finished = false;
    const current = (): boolean => m.inFlight && m.receipt === receipt;
    const release = (visibleAt: number): void => {
      m.inFlight = false;
      m.visibleAt = visibleAt;
      this.#changed();
    };
    const remove = (): void => {
      m.inFlight = false;
      const i = this.#queue.indexOf(m);
      if (i >= 0) this.#queue.splice(i, 1);
      this.#changed();
    };
    const stale = (what: string): Error =>
      new Error(
        `LearningDelivery.${what}: the delivery of ${JSON.stringify(m.id)} was already settled or lost`,
      );
    return {
      message,
      get active() {
        return current();
      },
      ack: () => {
        if (!current()) throw stale('ack');
        this.#stats.acked += 1;
        remove();
      },
      retry: (delayMs) => {
        if (!current()) throw stale('retry');
        this.#stats.retried += 1;
        release(Date.now() + Math.max(0, delayMs));
      },
      deadLetter: (headers, options = {}) => {
        if (!current()) throw stale('deadLetter');
        const own = options.originalHeaders === false ? {} : withoutInboxkitHeaders(m.headers);
        const entryHeaders = { ...own, ...headers };
        const bytes = copyBytes(m.body, entryHeaders);
        if (bytes > this.maxDeadLetterBytes) {
          throw new MessageTooLargeError(
            `the dead letter of ${JSON.stringify(m.id)} is ${bytes} bytes, over the DLQ's ${this.maxDeadLetterBytes}`,
            m.id === undefined ? {} : { messageId: m.id },
          );
        }
        this.#dlqSeq += 1;
        this.#dlq.push({
          entry: {
            id: entryHeaders[HEADERS.originalId] ?? m.id,
            body: m.body,
            headers: entryHeaders,
            position: `${this.name}.dlq:${this.#dlqSeq}`,
          },
          key: m.key,
        });
        this.#stats.deadLettered += 1;
        remove();
      },
      abandon: (cause) => {
        if (!current()) return;
        if (cause === 'stop-timeout' || cause === 'error') this.#stats.abandoned += 1;
        else this.#stats.crashes[cause] += 1;
        release(Date.now() + this.visibilityTimeoutMs);
      },
      recordOutcome: (status) => {
        this.#stats.outcomes[status] += 1;
      },
      takeCrash: (seam) => this.#takeCrash(seam, m.id),
      returnCrash: (seam) => {
        this.#crashes.unshift({ seam, id: m.id, remaining: 1 });
      },
      finish: () => {
        if (finished) return;
        finished = true;
        this.#openDeliveries -= 1;
        this.#changed();
      },
    };
  }

  #takeCrash(seam: CrashSeam, id: string | undefined): boolean {
    const armed = this.#crashes.find((c) => c.seam === seam && (c.id === undefined || c.id === id));
    if (!armed) return false;
    armed.remaining -= 1;
    if (armed.remaining <= 0) this.#crashes.splice(this.#crashes.indexOf(armed), 1);
    return true;
  }

  #changed(): void {
    this.#schedulePump();
    this.#notify();
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  #waitUntil(done: () => boolean, what: string, timeoutMs = DEFAULT_WAIT_TIMEOUT_MS): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!done()) return;
        this.#waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`LearningBroker.${what}() timed out after ${timeoutMs} ms.\n${this.describe()}`));
      }, timeoutMs);
      this.#waiters.add(check);
    });
  }
}

function withoutInboxkitHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (!INBOXKIT_HEADER.test(k)) kept[k] = v;
  return kept;
}

/** The size of a copy as the learning DLQ counts it: the body plus every header's name and value, in bytes. */
function copyBytes(body: string | Uint8Array | null, headers: Readonly<Record<string, string>>): number {
  let bytes =
    body === null ? 0 : typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.byteLength;
  for (const [name, value] of Object.entries(headers))
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  return bytes;
}
