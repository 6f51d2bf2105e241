// The demo on @inboxkit/testing's learning transport: an at-least-once broker in this process, with its own
// crash seams, and a Publisher over it so replays go through the CLI's replay engine unchanged.

import { PublishError } from '@inboxkit/core';
import type { DeadLetterQueueReader, IdempotentConsumer, OutgoingMessage, Publisher } from '@inboxkit/core';
import { LearningBroker, LearningTransport, learningDeadLetterReader } from '@inboxkit/testing';

import type { DeliveryCounts, DemoCrashSeam, DemoTransport } from '../demo-transport.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Publishes into the learning broker named by `destination`, as a broker's confirmed publish would. */
export function learningPublisher(broker: LearningBroker): Publisher {
  return {
    async publish(messages: readonly OutgoingMessage[]) {
      for (const m of messages) {
        if (m.destination !== broker.name)
          throw new PublishError(`no learning queue named ${JSON.stringify(m.destination)}`);
      }
      await broker.send(
        messages.map((m) => ({
          id: m.id,
          body: m.body,
          ...(m.headers !== undefined ? { headers: m.headers } : {}),
          ...(m.key !== undefined ? { key: m.key } : {}),
          ...(m.timestamp !== undefined ? { timestamp: m.timestamp } : {}),
        })),
      );
    },
    async close() {},
  };
}

export class LearningDemoTransport implements DemoTransport {
  readonly name = 'learning' as const;
  readonly label = ['learning transport from @inboxkit/testing: an at-least-once broker in this process'];
  readonly replayTransport = 'memory';
  // A lost delivery (a crash) comes back after 100 ms instead of the default second.
  readonly #broker = new LearningBroker({ visibilityTimeoutMs: 100 });
  readonly publisher: Publisher = learningPublisher(this.#broker);
  readonly #ids = new Set<string>();
  #transport: { stop(): Promise<void> } | undefined;

  async startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void> {
    const transport = new LearningTransport({ consumer, broker: this.#broker, concurrency: 4 });
    await transport.start();
    this.#transport = transport;
  }

  async stopConsumer(): Promise<void> {
    await this.#transport?.stop();
    this.#transport = undefined;
  }

  async publish(messages: readonly StoryMessage[]): Promise<void> {
    for (const m of messages) this.#ids.add(m.id);
    await this.#broker.send(
      messages.map((m) => ({
        id: m.id,
        key: m.key,
        body: m.body,
        headers: { [COPY_HEADER]: String(m.copy) },
      })),
    );
  }

  injectCrash(seam: DemoCrashSeam, id: string): void {
    this.#broker.injectCrash(seam, { id });
  }

  async settle(deadLetters: number, timeoutMs: number): Promise<void> {
    await this.#broker.drain({ timeoutMs });
    await this.#broker.waitForDeadLetters(deadLetters, { timeoutMs });
  }

  deliveryCounts(): DeliveryCounts {
    const s = this.#broker.stats;
    return {
      deliveries: s.delivered,
      distinctIds: this.#ids.size,
      duplicateCopies: s.duplicatesDelivered,
      redeliveries: s.redelivered,
      crashes: {
        'after-handler-before-commit': s.crashes['after-handler-before-commit'],
        'after-commit-before-ack': s.crashes['after-commit-before-ack'],
      },
    };
  }

  async deadLetterCount(): Promise<number> {
    return this.#broker.deadLetters().length;
  }

  deadLetterReader(): DeadLetterQueueReader {
    return learningDeadLetterReader(this.#broker);
  }

  async close(): Promise<void> {
    await this.stopConsumer();
    this.#broker.close();
  }
}
