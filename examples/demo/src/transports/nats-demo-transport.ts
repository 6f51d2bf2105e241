// The demo on NATS JetStream: a fresh stream and DLQ stream per run, and @inboxkit/nats's consumer, publisher and
// DLQ reader. The story's copies are published without msgID, as two producers (or a producer after a restart)
// would send them, so that JetStream's duplicate window drops none and the inbox is what applies each id once.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher, TransportConsumer } from '@inboxkit/core';
import { ensureStreams, natsConsumer, natsDeadLetterQueue, natsPublisher } from '@inboxkit/nats';
import { uniqueName } from '@inboxkit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

import { BrokerDemoTransport } from './broker-demo-transport.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

export class NatsDemoTransport extends BrokerDemoTransport {
  readonly name = 'nats' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'nats';
  readonly publisher: Publisher;
  protected readonly deadLetterPlace = 'the DLQ';
  readonly #nc: NatsConnection;
  readonly #base: string;

  private constructor(nc: NatsConnection, base: string, url: string) {
    super();
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

  protected transportConsumer<P, Tx>(handler: IdempotentConsumer<P, Tx>): TransportConsumer {
    return natsConsumer({
      connection: this.#nc,
      stream: this.#stream,
      consumer: 'payments',
      deadLetterSubject: this.#deadLetterSubject,
      handler,
      concurrency: 4,
      // A crashed delivery is back within seconds; working() keeps the running ones.
      ackWaitMs: 2_000,
    });
  }

  protected async send(messages: readonly StoryMessage[]): Promise<void> {
    const js = jetstream(this.#nc);
    for (const m of messages) {
      const h = headers();
      h.set('message-id', m.id);
      h.set(COPY_HEADER, String(m.copy));
      await js.publish(this.#subject, m.body, { headers: h });
    }
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
