// The port a transport implements so the delivery kit can settle its deliveries: four verbs in the broker's
// own terms. What to do with a delivery is decided once, by `settle()`; a transport only says how.

import type { DeadLetterForm, FormAttempt } from './dead-letter-forms.js';
import type { DeadLetterOutcome, RetryOutcome } from '../outcome.js';

/** Why a delivery is left to the broker (`BrokerSettlement.leave`). */
export interface LeaveReason {
  /**
   * - `redeliver-failed`: the broker did not take the retry (its copy not confirmed, the visibility not changed);
   * - `dead-letter-failed`: the dead letter was not confirmed (an outage: the source must stay);
   * - `dead-letter-too-large`: the broker refused every dead-letter form as too large;
   * - `handle-rejected`: `handle()`/`handleBatch()` rejected, which they never do by contract (a bug).
   */
  readonly cause: 'redeliver-failed' | 'dead-letter-failed' | 'dead-letter-too-large' | 'handle-rejected';
  /** The failure, when there was one. */
  readonly error?: unknown;
  /**
   * How long a broker that would redeliver at once (RabbitMQ's nack with requeue) should hold the delivery
   * first, so a broken path does not spin: the retry's delay, 1 s for a dead letter, both at most 5 s. A broker
   * that redelivers later anyway (SQS's visibility timeout, a Kafka seek) ignores it.
   */
  readonly holdMs: number;
}

/**
 * A broker's settlement verbs for its deliveries of type `D`, the port `settle()` drives. Each verb settles
 * (or publishes for) one delivery; none decides anything: which verb, in which order, with which dead-letter
 * form, is `settle()`'s. A verb reports a broker failure in its result and never rejects for one.
 *
 * @example
 * const port: BrokerSettlement<Held> = {
 *   ack: (d) => deleter.enqueue(d),
 *   redeliver: async (d, delayMs) => changeVisibility(d, delayMs),
 *   deadLetter: async (d, form, outcome) => send(deadLetterCopy(d, form, outcome)),
 *   leave: (d) => heartbeat.untrack(d),
 * };
 */
export interface BrokerSettlement<D> {
  /** Settles the delivery as done: ack, delete, commit the offset. Only called once its outcome is durable. */
  ack(delivery: D): void | Promise<void>;
  /**
   * Has the broker deliver it again after `delayMs` (0: as soon as it can), carrying the attempts made so far
   * where the broker needs them (`outcome.attempt`). `sent` once the broker took it (and, where the verb
   * publishes a copy, the original is settled); `too-large` when the broker can never take it as it is (the
   * delivery is then dead-lettered with reason `retry-copy-too-large`); `failed` otherwise (it is left).
   */
  redeliver(delivery: D, delayMs: number, outcome: RetryOutcome): Promise<FormAttempt>;
  /**
   * Publishes the delivery's dead letter in `form` (`deadLetterForms`) with the broker's confirmation, without
   * settling the delivery. `too-large` when the broker refuses this form on every attempt (the next smaller
   * form is tried); `failed` for anything that may pass (an outage: nothing is tried further, it is left).
   */
  deadLetter(delivery: D, form: DeadLetterForm, outcome: DeadLetterOutcome): Promise<FormAttempt>;
  /**
   * Leaves the delivery unsettled for the broker to deliver again (SQS: after its visibility timeout; RabbitMQ:
   * nack with requeue after `why.holdMs`; Kafka: no commit past it). Never loses it.
   */
  leave(delivery: D, why: LeaveReason): void | Promise<void>;
}
