// The one place a transport calls the idempotent consumer: `handle()`/`handleBatch()` guarded against rejecting
// (a bug, never a message's fault: the delivery is left to the broker), and a store outage ridden out as the
// broker's declared capability requires, so an outage never spends a delivery count nor dead-letters anything.

import type { IdempotentConsumer } from '../consumer-types.js';
import type { InboundMessage } from '../message.js';
import type { Outcome } from '../outcome.js';
import type { TransportFeatures } from './transport-features.js';

/** `handle()` or `handleBatch()` rejected, which they never do by contract: the delivery is left. */
export interface HandleRejected {
  readonly status: 'rejected';
  readonly error: unknown;
}

/** What `DeliveryGuard` answers for one delivery: the consumer's outcome, or its rejection. `settle()` takes both. */
export type GuardedOutcome = Outcome | HandleRejected;

/** The first pause between two tries of a held delivery while the store is out. */
export const FIRST_OUTAGE_PAUSE_MS = 100;
/** The longest pause between two tries of a held delivery while the store is out. */
export const MAX_OUTAGE_PAUSE_MS = 5_000;

/** Options of `DeliveryGuard`. */
export interface DeliveryGuardOptions {
  /** The consumer the transport feeds. */
  readonly consumer: Pick<IdempotentConsumer, 'handle' | 'handleBatch'>;
  /** The broker's declaration; `redeliverSpendsCount` picks the outage policy. */
  readonly features: Pick<TransportFeatures, 'redeliverSpendsCount'>;
  /** False once the transport is stopping: a held delivery then goes back with its `retry`. */
  readonly running: () => boolean;
  /** Resolves after `ms`, or at once when the transport stops (e.g. `abortableSleep(ms, stopSignal)`). */
  readonly sleep: (ms: number) => Promise<void>;
}

function storeUnavailable(outcome: Outcome): outcome is Extract<Outcome, { status: 'retry' }> {
  return outcome.status === 'retry' && outcome.reason === 'store-unavailable';
}

/**
 * Calls the consumer for a transport. It never rejects: a rejection becomes `{ status: 'rejected' }`, which
 * `settle()` leaves to the broker. When the broker counts redeliveries (`redeliverSpendsCount`), a `retry` with
 * reason `store-unavailable` is not handed back: the delivery is kept and tried again here, the pause doubling
 * from the retry's delay (at least 100 ms) up to 5 s, until the store answers or `running()` turns false —
 * nothing ran and nothing is counted meanwhile. Otherwise the outage's `retry` is returned as it is.
 *
 * @example
 * const guard = new DeliveryGuard({ consumer, features: { redeliverSpendsCount: true },
 *   running: () => this.#running, sleep: (ms) => abortableSleep(ms, stop.signal) });
 * await settle(port, held, await guard.handle(held.inbound), settleOptions);
 */
export class DeliveryGuard {
  readonly #o: DeliveryGuardOptions;
  readonly #hold: boolean;

  constructor(options: DeliveryGuardOptions) {
    this.#o = options;
    this.#hold = options.features.redeliverSpendsCount === true;
  }

  /** Whether a store outage is ridden out in process (the broker counts redeliveries). */
  get holdsOutages(): boolean {
    return this.#hold;
  }

  /** `consumer.handle(message)`, guarded. Never rejects. */
  async handle(message: InboundMessage): Promise<GuardedOutcome> {
    try {
      let outcome = await this.#o.consumer.handle(message);
      let pauseMs = Math.max(FIRST_OUTAGE_PAUSE_MS, outcome.status === 'retry' ? outcome.delayMs : 0);
      while (this.#hold && storeUnavailable(outcome) && this.#o.running()) {
        await this.#o.sleep(pauseMs);
        pauseMs = Math.min(MAX_OUTAGE_PAUSE_MS, pauseMs * 2);
        if (!this.#o.running()) break;
        outcome = await this.#o.consumer.handle(message);
      }
      return outcome;
    } catch (error) {
      return { status: 'rejected', error };
    }
  }

  /** `consumer.handleBatch(messages)`, guarded: the outcomes in input order. Never rejects. */
  async handleBatch(messages: readonly InboundMessage[]): Promise<GuardedOutcome[]> {
    try {
      const outcomes: Outcome[] = await this.#o.consumer.handleBatch(messages);
      let pauseMs = FIRST_OUTAGE_PAUSE_MS;
      while (this.#hold && this.#o.running()) {
        const waiting = messages.flatMap((_, i) => (storeUnavailable(outcomes[i]!) ? [i] : []));
        if (waiting.length === 0) break;
        await this.#o.sleep(Math.max(pauseMs, ...waiting.map((i) => (outcomes[i] as { delayMs: number }).delayMs)));
        pauseMs = Math.min(MAX_OUTAGE_PAUSE_MS, pauseMs * 2);
        if (!this.#o.running()) break;
        const again = await this.#o.consumer.handleBatch(waiting.map((i) => messages[i]!));
        waiting.forEach((i, k) => (outcomes[i] = again[k]!));
      }
      return outcomes;
    } catch (error) {
      const rejected: HandleRejected = { status: 'rejected', error };
      return messages.map(() => rejected);
    }
  }
}
