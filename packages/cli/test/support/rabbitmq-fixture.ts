// The replay suite's RabbitMQ: a quorum work queue with its DLX and `<queue>.dlq` declared by the transport's
// own topology, a rabbitmqConsumer feeding the core consumer.

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import {
  declareTopology,
  rabbitmqConsumer,
  rabbitmqDeadLetterQueue,
  rabbitmqPublisher,
} from '@inboxkit/rabbitmq';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';

import type { ReplayFixture } from './replay-fixture.js';
import { requireService } from './services.js';

const TOPOLOGY = { delayBucketsMs: [100, 500], deliveryLimit: 20 } as const;

/** A fresh queue, its topology and an admin connection on the test RabbitMQ. */
export async function rabbitmqFixture(): Promise<ReplayFixture> {
  const url = requireService('AMQP_URL');
  const queue = uniqueName('cli-rmq');
  const admin = await amqp.connect(url);
  admin.on('error', () => undefined);
  const channel = await admin.createConfirmChannel();
  channel.on('error', () => undefined);
  const topology = await declareTopology(channel, { ...TOPOLOGY, queue });
  const publisher = rabbitmqPublisher({ channel });
  let consumer: TransportConsumer | undefined;

  const depth = async (name: string): Promise<number> => {
    const ch = await admin.createChannel();
    try {
      return (await ch.checkQueue(name)).messageCount;
    } finally {
      await ch.close();
    }
  };

  return {
    transport: 'rabbitmq',
    dlq: topology.deadLetterQueue,
    cliArgs: ['--amqp-url', url],
    async start(handler: IdempotentConsumer<unknown, unknown>) {
      consumer = rabbitmqConsumer({
        connect: () => amqp.connect(url),
        queue,
        handler,
        topology: TOPOLOGY,
        concurrency: 4,
      });
      await consumer.start();
    },
    async stop() {
      await consumer?.stop();
      consumer = undefined;
    },
    async publish(messages) {
      await publisher.publish(
        messages.map((m) => ({ destination: '', routingKey: queue, id: m.id, body: m.body })),
      );
    },
    async deadLetters() {
      const reader = rabbitmqDeadLetterQueue({ connection: admin, queue });
      const out: DeadLetterEntry[] = [];
      try {
        for await (const entry of reader.browse({ limit: 100_000 })) out.push(entry);
      } finally {
        await reader.close();
      }
      return out;
    },
    async restore(entries) {
      await publisher.publish(
        entries.map((e) => ({
          destination: '',
          routingKey: topology.deadLetterQueue,
          id: e.id!,
          body: e.body ?? '',
          headers: e.headers,
        })),
      );
    },
    dlqDepth: () => depth(topology.deadLetterQueue),
    async sourceState() {
      return `ready=${await depth(queue)}`;
    },
    async dispose() {
      await consumer?.stop().catch(() => undefined);
      const ch = await admin.createChannel();
      for (const name of [
        queue,
        topology.deadLetterQueue,
        ...topology.delayBucketsMs.map((b) => topology.delayQueue(b)),
      ]) {
        await ch.deleteQueue(name).catch(() => undefined);
      }
      await ch.deleteExchange(topology.deadLetterExchange).catch(() => undefined);
      await admin.close().catch(() => undefined);
    },
  };
}
