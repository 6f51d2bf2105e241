// What happens to a delivery once its outcome is known, written once for every transport: the outcome → verb
// mapping, "publish the dead letter, then ack, else leave it", and the smaller dead-letter forms when a copy is
// too large for the broker (refused on every attempt, so never treated as an outage that would loop).

import type { Logger } from '../consumer-types.js';
import { MessageTooLargeError } from '../errors.js';
import { toErrorInfo } from '../error-info.js';
import type { DeadLetterOutcome, RetryOutcome } from '../outcome.js';
import type { BrokerSettlement, LeaveReason } from './broker-settlement.js';
import { DEAD_LETTER_FORMS, sendInFittingForm } from './dead-letter-forms.js';
import type { DeadLetterForm } from './dead-letter-forms.js';
import type { GuardedOutcome } from './delivery-guard.js';

/** The longest a delivery is held before it is left to a broker that would redeliver it at once. */
export const MAX_LEAVE_HOLD_MS = 5_000;
/** How long a delivery whose dead letter failed is held before it is left. */
const DEAD_LETTER_HOLD_MS = 1_000;

/** What `settle()` did with a delivery. */
export type Settlement =
  /** Acked as done (processed or duplicate). */
  | { readonly action: 'acked' }
  /** The broker redelivers it after the retry's delay. */
  | { readonly action: 'redelivered' }
  /** Its dead letter is confirmed in `form`, then it was acked. */
  | { readonly action: 'dead-lettered'; readonly form: DeadLetterForm }
  /** Left unsettled: the broker delivers it again (see `LeaveReason`). */
  | { readonly action: 'left'; readonly why: LeaveReason };

/** Options of `settle()`. */
export interface SettleOptions {
  /** Where the warnings (a smaller dead-letter form) and errors (a copy not confirmed) go. */
  readonly logger: Logger;
  /** Names the transport in log messages, e.g. `sqsConsumer`. */
  readonly what: string;
  /** Logged with each message (queue, topic, …). Default is none. */
  readonly context?: Readonly<Record<string, unknown>>;
}

/**
 * Settles `delivery` for `outcome` through the transport's verbs, and says what it did:
 *
 * | outcome | verbs |
 * |---|---|
 * | processed, duplicate | `ack` |
 * | retry | `redeliver(delayMs)`; too large → dead-letter (`retry-copy-too-large`); failed → `leave` |
 * | dead-letter | `deadLetter` in `full`, then `compact`, then `minimal` while the broker says too large; sent → `ack`; failed, or no form fits → `leave` |
 * | rejected (`DeliveryGuard`) | `leave` |
 *
 * A dead letter is acked only after the broker confirmed it; a form refused as too large gives way to the next
 * smaller one at once (it would be refused on every redelivery), while any other failure leaves the delivery
 * to be redelivered, which yields the same outcome again. Never rejects: a verb that throws counts as `failed`.
 *
 * @example
 * const outcome = await guard.handle(held.inbound);
 * const done = await settle(port, held, outcome, { logger, what: 'sqsConsumer' });
 * if (done.action !== 'acked' && done.action !== 'dead-lettered') returnGroupBehind(held);
 */
export async function settle<D>(
  port: BrokerSettlement<D>,
  delivery: D,
  outcome: GuardedOutcome,
  options: SettleOptions,
): Promise<Settlement> {
  switch (outcome.status) {
    case 'processed':
    case 'duplicate':
      await port.ack(delivery);
      return { action: 'acked' };
    case 'retry':
      return retry(port, delivery, outcome, options);
    case 'dead-letter':
      return deadLetter(port, delivery, outcome, options);
    case 'rejected':
      options.logger.error(
        { ...options.context, err: outcome.error },
        `${options.what}: handle() rejected; the message will be redelivered`,
      );
      return leave(port, delivery, { cause: 'handle-rejected', error: outcome.error, holdMs: DEAD_LETTER_HOLD_MS });
  }
}

async function retry<D>(port: BrokerSettlement<D>, delivery: D, outcome: RetryOutcome, options: SettleOptions): Promise<Settlement> {
  let attempt;
  try {
    attempt = await port.redeliver(delivery, Math.max(0, outcome.delayMs), outcome);
  } catch (error) {
    attempt = { status: 'failed', error } as const;
  }
  if (attempt.status === 'sent') return { action: 'redelivered' };
  if (attempt.status === 'too-large') {
    // The broker cannot take this retry on any attempt: handing it back would loop. It goes to the DLQ now.
    return deadLetter(port, delivery, retryCopyTooLarge(outcome, attempt.error), options);
  }
  options.logger.warn(
    { ...options.context, err: attempt.error, messageId: outcome.messageId, delayMs: outcome.delayMs },
    `${options.what}: the retry was not taken by the broker; the message stays and is redelivered`,
  );
  return leave(port, delivery, { cause: 'redeliver-failed', error: attempt.error, holdMs: Math.min(outcome.delayMs, MAX_LEAVE_HOLD_MS) });
}

async function deadLetter<D>(port: BrokerSettlement<D>, delivery: D, outcome: DeadLetterOutcome, options: SettleOptions): Promise<Settlement> {
  const result = await sendInFittingForm(DEAD_LETTER_FORMS, (form) => port.deadLetter(delivery, form, outcome));
  if (result.status === 'sent') {
    if (result.form !== 'full') {
      options.logger.warn(
        { ...options.context, messageId: outcome.messageId, form: result.form },
        `${options.what}: the dead letter was too large for the broker with everything; sent in a smaller form`,
      );
    }
    await port.ack(delivery);
    return { action: 'dead-lettered', form: result.form };
  }
  // Every form too large cannot happen with core's minimal form; were it to, the source stays rather than be lost.
  const cause = result.status === 'too-large' ? 'dead-letter-too-large' : 'dead-letter-failed';
  options.logger.error(
    { ...options.context, err: result.error, messageId: outcome.messageId, reason: outcome.reason },
    `${options.what}: the dead letter was not confirmed; the message stays and is redelivered`,
  );
  return leave(port, delivery, { cause, error: result.error, holdMs: DEAD_LETTER_HOLD_MS });
}

async function leave<D>(port: BrokerSettlement<D>, delivery: D, why: LeaveReason): Promise<Settlement> {
  try {
    await port.leave(delivery, why);
  } catch {
    // Leaving is doing nothing: the broker redelivers what was not settled whatever the verb met.
  }
  return { action: 'left', why };
}

/**
 * The dead-letter outcome of a retry whose copy the broker can never take (RabbitMQ: headers over 64 KiB with
 * the retry headers): reason `retry-copy-too-large`, the handler's error kept when there was one.
 */
export function retryCopyTooLarge(outcome: RetryOutcome, error?: unknown): DeadLetterOutcome {
  return {
    status: 'dead-letter',
    messageId: outcome.messageId,
    reason: 'retry-copy-too-large',
    attempts: outcome.attempt,
    error:
      outcome.error ??
      toErrorInfo(error instanceof MessageTooLargeError ? error : new MessageTooLargeError('the retry copy is too large for the broker')),
  };
}
