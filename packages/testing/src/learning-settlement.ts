// The learning broker's settlement verbs, the port core's `settle()` drives: the learning transport settles
// exactly as a real transport does, and a test can break one verb to prove the conformance suite notices.

import { DEAD_LETTER_FORMS, deadLetterForms, deadLetterRecord, isInboxkitError } from '@inboxkit/core';
import type {
  BrokerSettlement,
  DeadLetterForm,
  DeadLetterOutcome,
  FormAttempt,
  TransportFeatures,
} from '@inboxkit/core';

import type { LearningDelivery } from './learning-broker.js';

/**
 * What the learning broker guarantees: per-key order, a native delay, and a delivery count passed to core that
 * every redelivery raises (`redeliverSpendsCount`: a store outage is ridden out in process).
 */
export const LEARNING_TRANSPORT_FEATURES: TransportFeatures = Object.freeze({
  ordering: 'key',
  nativeDelay: true,
  deliveryCount: true,
  redeliverSpendsCount: true,
});

/**
 * The settlement verbs of a learning transport: `ack`, `retry(delayMs)`, the dead letter in the form asked
 * for (refused as too large over the broker's `maxDeadLetterBytes`), and `abandon` to leave it.
 *
 * @example
 * await settle(new LearningSettlement(consumer.name), delivery, outcome, { logger, what: 'learning' });
 */
export class LearningSettlement implements BrokerSettlement<LearningDelivery> {
  readonly #consumerName: string;

  constructor(consumerName: string) {
    this.#consumerName = consumerName;
  }

  ack(delivery: LearningDelivery): void {
    if (delivery.active) delivery.ack();
  }

  async redeliver(delivery: LearningDelivery, delayMs: number): Promise<FormAttempt> {
    if (delivery.active) delivery.retry(delayMs);
    return { status: 'sent' };
  }

  async deadLetter(
    delivery: LearningDelivery,
    form: DeadLetterForm,
    outcome: DeadLetterOutcome,
  ): Promise<FormAttempt> {
    if (!delivery.active) return { status: 'failed', error: new Error('the delivery was lost') };
    const record = deadLetterRecord(this.#consumerName, delivery.message, outcome);
    const spec = deadLetterForms(record)[DEAD_LETTER_FORMS.indexOf(form)]!;
    try {
      delivery.deadLetter(spec.headers, { originalHeaders: spec.originalHeaders });
      return { status: 'sent' };
    } catch (error) {
      const tooLarge = isInboxkitError(error) && error.code === 'MESSAGE_TOO_LARGE';
      return { status: tooLarge ? 'too-large' : 'failed', error };
    }
  }

  leave(delivery: LearningDelivery): void {
    delivery.abandon('error');
  }
}
