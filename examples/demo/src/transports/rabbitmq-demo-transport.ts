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

import { BrokerDemoTransport } from './broker-demo-transport.js';
import { CONSUMER_NAME } from '../payments.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Small delay buckets: the demo's retries wait 50–100 ms, not the production buckets' 250 ms and up. */
const TOPOLOGY: RabbitmqTopologySettings = { delayBucketsMs: [100, 250, 1_000], deliveryLimit: 20 };

export class RabbitmqDemoTransport extends BrokerDemoTransport {
  readonly name = 'rabbitmq' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'rabbitmq';
  readonly publisher: Publisher;
  protected readonly deadLetterPlace: string;
  readonly #url: string;
  readonly #queue: string;
  readonly #admin: amqp.ChannelModel;
  readonly #channel: amqp.ConfirmChannel;

  private constructor(url: string, queue: string, admin: amqp.ChannelModel, channel: amqp.ConfirmChannel) {
    super();
    this.#url = url;
    this.#queue = queue;
    this.#admin = admin;
    this.#channel = channel;
    this.deadLetterPlace = `${queue}.dlq`;
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

  protected transportConsumer<P, Tx>(handler: IdempotentConsumer<P, Tx>): TransportConsumer {
    return rabbitmqConsumer({
      connect: () =>
        amqp.connect(this.#url, { clientProperties: { connection_name: 'inboxkit-demo-consumer' } }),
      queue: this.#queue,
      handler,
      topology: TOPOLOGY,
      concurrency: 4,
    });
  }

  protected async send(messages: readonly StoryMessage[]): Promise<void> {
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
