// The demo on NATS JetStream: a fresh stream and DLQ stream per run, and @inboxkit/nats's consumer, publisher and
// DLQ reader. The story's copies are published without msgID, as two producers (or a producer after a restart)
// would send them, so that JetStream's duplicate window drops none and the inbox is what applies each id once.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher, TransportConsumer } from '@inboxkit/core';
import { ensureStreams, natsConsumer, natsDeadLetterQueue, natsPublisher } from '@inboxkit/nats';
import { uniqueName } from '@inboxkit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

import type { DeliveryCounts, DemoCrashSeam, DemoTransport } from '../demo-transport.js';
import { FaultInjector } from '../fault-injector.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

export class NatsDemoTransport implements DemoTransport {
  readonly name = 'nats' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'nats';
  readonly publisher: Publisher;
  readonly #nc: NatsConnection;
  readonly #base: string;
  readonly #faults = new FaultInjector();
  #running: TransportConsumer | undefined;

  private constructor(nc: NatsConnection, base: string, url: string) {
    this.#nc = nc;
    this.#base = base;
    this.publisher = natsPublisher({ connection: nc });
    this.label = [
      `NATS JetStream at ${url}: natsConsumer, natsPublisher, natsDeadLetterQueue`,
      `stream ${this.#stream}, DLQ stream ${this.#stream}_DLQ`,
    ];
  }

  get #stream(): string {
    return `DEMO_${this.#base}`;
  }
  get #subject(): string {
    return `demo.payments.${this.#base}`;
  }
  get #deadLetterSubject(): string {
    return `demo.dlq.${this.#base}`;
  }

  /** Creates the run's streams. Rejects when the server cannot be reached. */
  static async open(url: string): Promise<NatsDemoTransport> {
    const nc = await connect({ servers: url });
    try {
      const base = uniqueName('payments').replace(/[^a-zA-Z0-9]/g, '_');
      const t = new NatsDemoTransport(nc, base, url);
      await ensureStreams({
        connection: nc,
        stream: `DEMO_${base}`,
        subjects: [`demo.payments.${base}`],
        deadLetterStream: `DEMO_${base}_DLQ`,
        deadLetterSubject: `demo.dlq.${base}`,
      });
      return t;
    } catch (error) {
      await nc.close();
      throw error;
    }
  }

  async startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void> {
    const transport = natsConsumer({
      connection: this.#nc,
      stream: this.#stream,
      consumer: 'payments',
      deadLetterSubject: this.#deadLetterSubject,
      handler: this.#faults.wrap(consumer),
      concurrency: 4,
      // A crashed delivery is back within seconds; working() keeps the running ones.
      ackWaitMs: 2_000,
    });
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
    const js = jetstream(this.#nc);
    for (const m of messages) {
      const h = headers();
      h.set('message-id', m.id);
      h.set(COPY_HEADER, String(m.copy));
      await js.publish(this.#subject, m.body, { headers: h });
    }
  }

  injectCrash(seam: DemoCrashSeam, id: string): void {
    this.#faults.arm(seam, id);
  }

  async settle(deadLetters: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await this.#faults.whenAllFinal(timeoutMs);
    while ((await this.deadLetterCount()) < deadLetters) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${deadLetters} dead letters in the DLQ`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  deliveryCounts(): DeliveryCounts {
    return this.#faults.counts();
  }

  async deadLetterCount(): Promise<number> {
    const jsm = await jetstreamManager(this.#nc);
    return (await jsm.streams.info(`${this.#stream}_DLQ`)).state.messages;
  }

  deadLetterReader(): DeadLetterQueueReader {
    return natsDeadLetterQueue({ connection: this.#nc, stream: `${this.#stream}_DLQ` });
  }

  async close(): Promise<void> {
    await this.stopConsumer().catch(() => undefined);
    const jsm = await jetstreamManager(this.#nc);
    await jsm.streams.delete(this.#stream).catch(() => undefined);
    await jsm.streams.delete(`${this.#stream}_DLQ`).catch(() => undefined);
    await this.#nc.close();
  }
}
