// A deliberately broken transport over the learning broker: correct when `fault` is `none`, otherwise wrong in
// exactly one classic way. The conformance suite must fail on each fault.

import { deadLetterHeaders, deadLetterRecord } from '@inboxkit/core';
import type { IdempotentConsumer, InboundMessage, TransportConsumer } from '@inboxkit/core';

import { learningTransportHarness } from '../../src/index.js';
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
  | 'broker-id-as-message-id';

class FaultyTransport implements TransportConsumer {
  readonly #running = new Set<Promise<void>>();
  readonly #deliveries = new Set<LearningDelivery>();
  #unsubscribe: (() => void) | undefined;

  constructor(
    readonly broker: LearningBroker,
    readonly consumer: IdempotentConsumer<unknown, unknown>,
    readonly fault: Fault,
    readonly concurrency: number,
  ) {}

  async start(): Promise<void> {
    this.#unsubscribe = this.broker.subscribe({
      capacity: () => (this.#unsubscribe ? this.concurrency - this.#deliveries.size : 0),
      deliver: (d) => {
        this.#deliveries.add(d);
        const run = this.#process(d).finally(() => {
          this.#deliveries.delete(d);
          this.#running.delete(run);
          d.finish();
        });
        this.#running.add(run);
      },
      crashed: () => (this.#unsubscribe = undefined),
    });
  }

  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    if (this.fault === 'stop-abandons') {
      for (const d of this.#deliveries) d.abandon('stop-timeout');
      return;
    }
    await Promise.all([...this.#running]);
  }

  async #process(d: LearningDelivery): Promise<void> {
    if (this.fault === 'ack-on-receipt') d.ack();
    const message: InboundMessage =
      this.fault === 'broker-id-as-message-id'
        ? { ...d.message, id: d.message.source.brokerMessageId }
        : d.message;
    const outcome = await this.consumer.handle(message);
    if (!d.active) return;
    switch (outcome.status) {
      case 'processed':
      case 'duplicate':
        if (this.fault === 'never-ack') d.abandon('error');
        else d.ack();
        return;
      case 'retry':
        if (this.fault === 'retry-without-delay') d.retry(0);
        else if (this.fault === 'requeue-retries-at-back') {
          await this.broker.send([{ id: d.message.id!, body: d.message.body, headers: d.message.headers }]);
          d.ack();
        } else d.retry(outcome.delayMs);
        return;
      case 'dead-letter':
        if (this.fault === 'ack-dead-letters') d.ack();
        else if (this.fault === 'dead-letter-without-headers') d.deadLetter({});
        else d.deadLetter(deadLetterHeaders(deadLetterRecord(this.consumer.name, d.message, outcome)));
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
