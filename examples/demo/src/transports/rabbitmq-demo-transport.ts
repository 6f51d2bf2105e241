// The demo on RabbitMQ: a fresh quorum work queue per run with its delay queues, DLX and DLQ, and
// @inboxkit/rabbitmq's consumer, confirm-channel publisher and DLQ reader.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher } from '@inboxkit/core';
import {
  declareTopology,
  rabbitmqConsumer,
  rabbitmqDeadLetterQueue,
  rabbitmqPublisher,
  topologyNames,
} from '@inboxkit/rabbitmq';
import type { RabbitmqTopologySettings } from '@inboxkit/rabbitmq';
import type { TransportConsumer } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';

import type { DeliveryCounts, DemoCrashSeam, DemoTransport } from '../demo-transport.js';
import { FaultInjector } from '../fault-injector.js';
import { CONSUMER_NAME } from '../payments.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Small delay buckets: the demo's retries wait 50–100 ms, not the production buckets' 250 ms and up. */
const TOPOLOGY: RabbitmqTopologySettings = { delayBucketsMs: [100, 250, 1_000], deliveryLimit: 20 };

export class RabbitmqDemoTransport implements DemoTransport {
  readonly name = 'rabbitmq' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'rabbitmq';
  readonly publisher: Publisher;
  readonly #url: string;
  readonly #queue: string;
  readonly #admin: amqp.ChannelModel;
  readonly #channel: amqp.ConfirmChannel;
  readonly #faults = new FaultInjector();
  #running: TransportConsumer | undefined;

  private constructor(url: string, queue: string, admin: amqp.ChannelModel, channel: amqp.ConfirmChannel) {
    this.#url = url;
    this.#queue = queue;
    this.#admin = admin;
    this.#channel = channel;
    this.publisher = rabbitmqPublisher({ channel });
    this.label = [
      `RabbitMQ at ${new URL(url).host}: rabbitmqConsumer, rabbitmqPublisher, rabbitmqDeadLetterQueue`,
      `quorum queue ${queue}, DLQ ${topologyNames(queue).deadLetterQueue}`,
    ];
  }

  /** Declares the run's topology. Rejects when the broker cannot be reached. */
  static async open(url: string): Promise<RabbitmqDemoTransport> {
    const admin = await amqp.connect(url, { clientProperties: { connection_name: 'inboxkit-demo' } });
    admin.on('error', () => undefined);
    const channel = await admin.createConfirmChannel();
    channel.on('error', () => undefined);
    const queue = uniqueName('demo-payments');
    await declareTopology(channel, { ...TOPOLOGY, queue });
    return new RabbitmqDemoTransport(url, queue, admin, channel);
  }

  async startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void> {
    const transport = rabbitmqConsumer({
      connect: () =>
        amqp.connect(this.#url, { clientProperties: { connection_name: 'inboxkit-demo-consumer' } }),
      queue: this.#queue,
      handler: this.#faults.wrap(consumer),
      topology: TOPOLOGY,
      concurrency: 4,
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
    await this.publisher.publish(
      messages.map((m) => ({
        destination: '',
        routingKey: this.#queue,
        id: m.id,
        body: m.body,
        headers: { [COPY_HEADER]: String(m.copy), 'content-type': 'application/json' },
      })),
    );
  }

  injectCrash(seam: DemoCrashSeam, id: string): void {
    this.#faults.arm(seam, id);
  }

  async settle(deadLetters: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await this.#faults.whenAllFinal(timeoutMs);
    while ((await this.deadLetterCount()) < deadLetters) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${deadLetters} dead letters in ${this.#queue}.dlq`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  deliveryCounts(): DeliveryCounts {
    return this.#faults.counts();
  }

  async deadLetterCount(): Promise<number> {
    const { messageCount } = await this.#channel.checkQueue(topologyNames(this.#queue).deadLetterQueue);
    return messageCount;
  }

  deadLetterReader(): DeadLetterQueueReader {
    return rabbitmqDeadLetterQueue({ connection: this.#admin, queue: this.#queue, consumer: CONSUMER_NAME });
  }

  async close(): Promise<void> {
    await this.stopConsumer().catch(() => undefined);
    const names = topologyNames(this.#queue);
    for (const queue of [
      names.queue,
      names.deadLetterQueue,
      ...TOPOLOGY.delayBucketsMs!.map((b) => names.delayQueue(b)),
    ]) {
      await this.#channel.deleteQueue(queue).catch(() => undefined);
    }
    await this.#channel.deleteExchange(names.deadLetterExchange).catch(() => undefined);
    await this.#admin.close().catch(() => undefined);
  }
}
