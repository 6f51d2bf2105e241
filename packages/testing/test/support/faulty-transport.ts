// A deliberately broken transport over the learning broker: correct when `fault` is `none`, otherwise wrong in
// exactly one classic way. The conformance suite must fail on each fault.

import { abortableSleep, attemptLedgerOf, DeliveryGuard, settle, silentLogger } from '@inboxkit/core';
import type {
  DeadLetterForm,
  DeadLetterOutcome,
  FormAttempt,
  IdempotentConsumer,
  InboundMessage,
  TransportConsumer,
} from '@inboxkit/core';

import {
  LEARNING_TRANSPORT_FEATURES,
  LearningSettlement,
  learningTransportHarness,
} from '../../src/index.js';
import type {
  HarnessConsumerOptions,
  LearningBroker,
  LearningDelivery,
  TransportHarness,
} from '../../src/index.js';

export type Fault =
  | 'none'
  /** autoAck: the message is acked when it arrives, before its outcome is durable. */
  | 'ack-on-receipt'
  /** processed messages are never acked. */
  | 'never-ack'
  /** retries are redelivered at once, ignoring the delay. */
  | 'retry-without-delay'
  /** a retry is acked and re-published at the back of the queue, without its key. */
  | 'requeue-retries-at-back'
  /** dead letters go to the DLQ without inboxkit's headers. */
  | 'dead-letter-without-headers'
  /** dead letters are acked and dropped: nothing reaches the DLQ. */
  | 'ack-dead-letters'
  /** stop() gives up in-flight deliveries at once instead of draining them. */
  | 'stop-abandons'
  /** the message id is taken from the broker's copy (changes per copy), not from the producer's header. */
  | 'broker-id-as-message-id'
  /** a broken port: a dead letter the broker refuses as too large is reported as an outage (`failed`). */
  | 'oversize-dead-letter-as-outage'
  /** a wrong capability: the broker counts redeliveries, the transport declares it does not. */
  | 'outage-redelivers'
  /** a broken charger: every fetched delivery is charged on arrival (ten fetched, run one at a time). */
  | 'charge-on-fetch';

/** The learning verbs with `deadLetter` broken: too large is reported as an outage, so the message loops. */
class OversizeAsOutage extends LearningSettlement {
  override async deadLetter(
    d: LearningDelivery,
    form: DeadLetterForm,
    outcome: DeadLetterOutcome,
  ): Promise<FormAttempt> {
    const attempt = await super.deadLetter(d, form, outcome);
    return attempt.status === 'too-large' ? { status: 'failed', error: attempt.error } : attempt;
  }
}

class FaultyTransport implements TransportConsumer {
  readonly #running = new Set<Promise<void>>();
  readonly #deliveries = new Set<LearningDelivery>();
  #unsubscribe: (() => void) | undefined;
  readonly #stopped = new AbortController();
  readonly #port: LearningSettlement;
  readonly #guard: DeliveryGuard;
  /** charge-on-fetch: deliveries run one after another. */
  #chain: Promise<void> = Promise.resolve();

  constructor(
    readonly broker: LearningBroker,
    readonly consumer: IdempotentConsumer<unknown, unknown>,
    readonly fault: Fault,
    readonly concurrency: number,
  ) {
    this.#port =
      fault === 'oversize-dead-letter-as-outage'
        ? new OversizeAsOutage(consumer.name)
        : new LearningSettlement(consumer.name);
    this.#guard = new DeliveryGuard({
      consumer,
      features: fault === 'outage-redelivers' ? { redeliverSpendsCount: false } : LEARNING_TRANSPORT_FEATURES,
      running: () => this.#unsubscribe !== undefined,
      sleep: (ms) => abortableSleep(ms, this.#stopped.signal),
    });
  }

  async start(): Promise<void> {
    this.#unsubscribe = this.broker.subscribe({
      capacity: () =>
        this.#unsubscribe
          ? (this.fault === 'charge-on-fetch' ? 10 : this.concurrency) - this.#deliveries.size
          : 0,
      deliver: (d) => {
        this.#deliveries.add(d);
        const run = this.#run(d).finally(() => {
          this.#deliveries.delete(d);
          this.#running.delete(run);
          d.finish();
        });
        this.#running.add(run);
      },
      crashed: () => {
        this.#unsubscribe = undefined;
        this.#stopped.abort();
      },
    });
  }

  async stop(): Promise<void> {
    this.#stopped.abort();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    if (this.fault === 'stop-abandons') {
      for (const d of this.#deliveries) d.abandon('stop-timeout');
      return;
    }
    await Promise.all([...this.#running]);
  }

  #run(d: LearningDelivery): Promise<void> {
    if (this.fault !== 'charge-on-fetch') return this.#process(d);
    // Charged as it arrives, long before it runs; the broker's count is left out so only the charge counts.
    const message = { ...d.message, deliveryCount: undefined };
    const charged = attemptLedgerOf(this.consumer)!.recordAttemptsStarted([message]);
    this.#chain = this.#chain.then(async () => {
      await charged;
      if (d.active) await this.#process(d, message);
    });
    return this.#chain;
  }

  async #process(d: LearningDelivery, received: InboundMessage = d.message): Promise<void> {
    if (this.fault === 'ack-on-receipt') d.ack();
    const message: InboundMessage =
      this.fault === 'broker-id-as-message-id'
        ? { ...received, id: received.source.brokerMessageId }
        : received;
    const outcome = await this.#guard.handle(message);
    if (!d.active) return;
    if (outcome.status === 'rejected') {
      d.abandon('error');
      return;
    }
    switch (outcome.status) {
      case 'processed':
      case 'duplicate':
        if (this.fault === 'never-ack') d.abandon('error');
        else await settle(this.#port, d, outcome, { logger: silentLogger, what: 'faulty' });
        return;
      case 'retry':
        if (this.fault === 'retry-without-delay') d.retry(0);
        else if (this.fault === 'requeue-retries-at-back') {
          await this.broker.send([{ id: d.message.id!, body: d.message.body, headers: d.message.headers }]);
          d.ack();
        } else await settle(this.#port, d, outcome, { logger: silentLogger, what: 'faulty' });
        return;
      case 'dead-letter':
        if (this.fault === 'ack-dead-letters') d.ack();
        else if (this.fault === 'dead-letter-without-headers') d.deadLetter({});
        else await settle(this.#port, d, outcome, { logger: silentLogger, what: 'faulty' });
        return;
    }
  }
}

/** A learning harness whose consumers are `FaultyTransport`s with `fault`. */
export function faultyHarness(fault: Fault): TransportHarness {
  const base = learningTransportHarness({ visibilityTimeoutMs: 100 });
  const started: TransportConsumer[] = [];
  return {
    ...base,
    async startConsumer(consumer, options: HarnessConsumerOptions = {}) {
      const transport = new FaultyTransport(base.broker, consumer, fault, options.concurrency ?? 1);
      await transport.start();
      started.push(transport);
      return transport;
    },
    async dispose() {
      await Promise.all(started.map((t) => t.stop()));
      await base.dispose();
    },
  };
}
