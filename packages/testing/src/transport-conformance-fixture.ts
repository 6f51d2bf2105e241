// What one transport conformance check works with: a fresh harness, consumers built with real
// idempotentConsumer() over InMemoryInboxStore, an effect log that counts only committed effects, and the
// restart check that proves a message was settled.

import { setTimeout as sleep } from 'node:timers/promises';

import { idempotentConsumer } from '@inboxkit/core';
import type {
  BackoffPolicy,
  DeadLetterEntry,
  DecodedMessage,
  HandlerContext,
  IdempotentConsumer,
  PayloadSchema,
  TransportConsumer,
} from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import type { InMemoryTransaction } from '@inboxkit/core/memory';
import { expect } from 'vitest';

import { OutcomeRecorder } from './outcome-recorder.js';
import type { HarnessConsumerOptions, TransportHarness } from './transport-harness.js';
import { uniqueName } from './unique-name.js';

/** Tuning of the suite for a broker's speed. Every value has a default that suits a local broker. */
export interface TransportConformanceOptions {
  /** How long to wait for an outcome or a dead letter. Default is 30,000 ms. */
  readonly waitTimeoutMs?: number;
  /**
   * After the last expected message, how long to keep watching for a redelivery that must not come. Set it
   * above the harness's redelivery delay (SQS: the visibility timeout) so an unsettled message has time to
   * show up. Default is 1,000 ms.
   */
  readonly quietPeriodMs?: number;
  /** Timeout of each test. Default is 120,000 ms. */
  readonly testTimeoutMs?: number;
  /** Backoff of the suite's consumers. Default: 100 ms, ×2, at most 400 ms, no jitter. */
  readonly backoff?: BackoffPolicy;
  /** Passed to `startConsumer`. Default: the transport's own defaults. */
  readonly consumerOptions?: HarnessConsumerOptions;
}

/** The payload every conformance message carries. */
export interface ConformancePayload {
  readonly kind: string;
  readonly n?: number;
  readonly key?: string;
}

/** Accepts objects with a string `kind`: anything else is `schema-invalid`. */
const payloadSchema: PayloadSchema<ConformancePayload> = {
  safeParse(value: unknown) {
    const ok =
      typeof value === 'object' && value !== null && typeof (value as { kind?: unknown }).kind === 'string';
    return ok
      ? { success: true, data: value as ConformancePayload }
      : { success: false, error: new Error('kind must be a string') };
  },
};

export type ConformanceHandler = (
  message: DecodedMessage<ConformancePayload>,
  context: HandlerContext<InMemoryTransaction>,
) => Promise<void>;

/** A consumer built by the fixture, with the recorder its outcomes go to. */
export interface ConformanceConsumer {
  readonly consumer: IdempotentConsumer<ConformancePayload, InMemoryTransaction>;
  readonly recorder: OutcomeRecorder;
}

/** A handler gate: the handler waits on it, the test opens it (or fails it, as a dying process would). */
export interface Gate {
  readonly entered: Promise<void>;
  enter(): void;
  wait(): Promise<void>;
  open(): void;
  fail(error: Error): void;
}

export function gate(): Gate {
  let enter!: () => void;
  let open!: () => void;
  let fail!: (error: Error) => void;
  const entered = new Promise<void>((resolve) => (enter = resolve));
  const opened = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  opened.catch(() => undefined);
  return { entered, enter, wait: () => opened, open, fail };
}

/** Everything one conformance check creates, torn down in `dispose`. */
export class ConformanceFixture {
  readonly harness: TransportHarness;
  readonly options: ResolvedConformanceOptions;
  /** The "database": how many times each message's effect was applied. */
  readonly effects = new Map<string, number>();
  readonly #started: TransportConsumer[] = [];

  constructor(harness: TransportHarness, options: ResolvedConformanceOptions) {
    this.harness = harness;
    this.options = options;
  }

  /** Applies the effect of `id` through the handler's transaction: it counts only if the transaction commits. */
  applyEffect(id: string, tx: InMemoryTransaction): void {
    tx.onCommit(() => this.effects.set(id, (this.effects.get(id) ?? 0) + 1));
  }

  effectCount(id: string): number {
    return this.effects.get(id) ?? 0;
  }

  /** `{ timeoutMs }` for the recorder's waits. */
  get wait(): { readonly timeoutMs: number } {
    return { timeoutMs: this.options.waitTimeoutMs };
  }

  consumer(
    config: {
      name?: string;
      store?: InMemoryInboxStore;
      handler?: ConformanceHandler;
      maxAttempts?: number;
      /** Default is the suite's `backoff` option. */
      backoff?: BackoffPolicy;
    } = {},
  ): ConformanceConsumer {
    const recorder = new OutcomeRecorder();
    const consumer = idempotentConsumer<ConformancePayload, InMemoryTransaction>({
      name: config.name ?? uniqueName('conformance'),
      store: config.store ?? new InMemoryInboxStore(),
      schema: payloadSchema,
      handler:
        config.handler ??
        (async (message, { tx }) => {
          this.applyEffect(message.id, tx);
        }),
      maxAttempts: config.maxAttempts ?? 5,
      backoff: config.backoff ?? this.options.backoff,
      hooks: { onOutcome: recorder.hook },
    });
    return { consumer, recorder };
  }

  async start(test: ConformanceConsumer, options?: HarnessConsumerOptions): Promise<TransportConsumer> {
    const consumer = test.consumer as unknown as IdempotentConsumer<unknown, unknown>;
    const started = await this.harness.startConsumer(consumer, {
      ...this.options.consumerOptions,
      ...options,
    });
    this.#started.push(started);
    return started;
  }

  /**
   * Proves that none of `ids` is still on the broker: a second consumer with a fresh inbox (so a redelivery
   * would be processed again, not hidden as a duplicate) must see a new sentinel message and, during the
   * quiet period after it, none of `ids`.
   */
  async expectNoRedelivery(ids: readonly (string | undefined)[], previous: TransportConsumer): Promise<void> {
    await previous.stop();
    const second = this.consumer();
    await this.start(second);
    const sentinel = uniqueName('sentinel');
    await this.harness.publish([{ id: sentinel, body: JSON.stringify({ kind: 'sentinel' }) }]);
    await second.recorder.waitFor(sentinel, 'processed', { timeoutMs: this.options.waitTimeoutMs });
    await sleep(this.options.quietPeriodMs);
    const redelivered = second.recorder.events.filter((e) => ids.includes(e.id));
    expect(
      redelivered.map((e) => `${String(e.id)} ${e.outcome.status}`),
      `settled messages came back after a restart: the transport did not ack them\n${second.recorder.describe()}`,
    ).toEqual([]);
  }

  async dispose(): Promise<void> {
    const results = await Promise.allSettled(this.#started.map((c) => c.stop()));
    await this.harness.dispose();
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

export function text(body: DeadLetterEntry['body']): string | null {
  return body === null || typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
}

export function header(entry: DeadLetterEntry, name: string): string | undefined {
  for (const [k, v] of Object.entries(entry.headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}

const DEFAULT_BACKOFF: BackoffPolicy = Object.freeze({
  initialDelayMs: 100,
  multiplier: 2,
  maxDelayMs: 400,
  jitter: 'none',
});

/** The options with their defaults filled in. */
export type ResolvedConformanceOptions = Required<Omit<TransportConformanceOptions, 'consumerOptions'>> &
  TransportConformanceOptions;

/** Fills in the defaults of `options`. */
export function resolveConformanceOptions(
  options: TransportConformanceOptions = {},
): ResolvedConformanceOptions {
  return Object.freeze({
    waitTimeoutMs: options.waitTimeoutMs ?? 30_000,
    quietPeriodMs: options.quietPeriodMs ?? 1_000,
    testTimeoutMs: options.testTimeoutMs ?? 120_000,
    backoff: options.backoff ?? DEFAULT_BACKOFF,
    ...(options.consumerOptions ? { consumerOptions: options.consumerOptions } : {}),
  });
}
