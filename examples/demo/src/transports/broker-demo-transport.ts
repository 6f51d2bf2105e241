// What the demo's broker transports do alike, written once: the fault injector wrapped around the consumer
// they drive (crash seams, delivery counts), the one transport consumer running at a time, noting what is sent
// before it is published, and waiting until the story has settled — every message acked or dead-lettered, and
// the DLQ holding what the story expects. A broker's transport says only how to consume, publish and count
// its DLQ.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher, TransportConsumer } from '@inboxkit/core';

import type { DeliveryCounts, DemoCrashSeam, DemoTransport, TransportName } from '../demo-transport.js';
import { FaultInjector } from '../fault-injector.js';
import type { StoryMessage } from '../story.js';

export abstract class BrokerDemoTransport implements DemoTransport {
  abstract readonly name: TransportName;
  abstract readonly label: readonly string[];
  abstract readonly replayTransport: string;
  abstract readonly publisher: Publisher;
  /** The DLQ's name in a timeout's message (`the DLQ`, `orders.dlq`). */
  protected abstract readonly deadLetterPlace: string;
  readonly #faults = new FaultInjector();
  #running: TransportConsumer | undefined;

  /** The broker's transport consumer driving `handler` (not started). */
  protected abstract transportConsumer<P, Tx>(handler: IdempotentConsumer<P, Tx>): TransportConsumer;
  /** Publishes the story's messages with the broker's confirmation, in order. */
  protected abstract send(messages: readonly StoryMessage[]): Promise<void>;
  abstract deadLetterCount(): Promise<number>;
  abstract deadLetterReader(): DeadLetterQueueReader;
  abstract close(): Promise<void>;

  async startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void> {
    const transport = this.transportConsumer(this.#faults.wrap(consumer));
    await transport.start();
    this.#running = transport;
  }

  async stopConsumer(): Promise<void> {
    const running = this.#running;
    this.#running = undefined;
    await running?.stop();
  }

  async publish(messages: readonly StoryMessage[]): Promise<void> {
    this.#faults.sent(messages);
    await this.send(messages);
  }

  injectCrash(seam: DemoCrashSeam, id: string): void {
    this.#faults.arm(seam, id);
  }

  async settle(deadLetters: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await this.#faults.whenAllFinal(timeoutMs);
    while ((await this.deadLetterCount()) < deadLetters) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${deadLetters} dead letters in ${this.deadLetterPlace}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  deliveryCounts(): DeliveryCounts {
    return this.#faults.counts();
  }
}
