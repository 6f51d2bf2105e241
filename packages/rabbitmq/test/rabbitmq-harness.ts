// The TransportHarness of the RabbitMQ transport for the conformance suite: a fresh work queue (and its
// delay queues, DLX and DLQ) on the real broker per test; `crash()` drops the consumers' connections
// without settling anything and keeps them from reconnecting, as a killed process would.

import amqp from 'amqplib';
import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import type { HarnessConsumerOptions, HarnessMessage, TransportHarness } from '@inboxkit/testing';
import { uniqueName } from '@inboxkit/testing';
import { declareTopology, rabbitmqConsumer, rabbitmqDeadLetterQueue } from '../src/index.js';
import type { AmqpConnection, RabbitmqConsumerOptions, RabbitmqTopologySettings } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';

/** Small delay buckets keep declaring fast and cover the suite's retry delays (100–400 ms). */
export const TEST_TOPOLOGY: RabbitmqTopologySettings = Object.freeze({
  delayBucketsMs: [100, 250, 500, 1_000, 5_000],
  deliveryLimit: 20,
});

/** Options of `rabbitmqHarness`. */
export interface RabbitmqHarnessOptions {
  readonly topology?: RabbitmqTopologySettings;
  /** Extra consumer options for every consumer the harness starts. */
  readonly consumer?: Partial<Omit<RabbitmqConsumerOptions, 'connect' | 'connection' | 'queue' | 'handler'>>;
}

/** The harness, plus its queue name and admin connection for transport-specific tests. */
export interface RabbitmqHarness extends TransportHarness {
  readonly queue: string;
  readonly topology: RabbitmqTopologySettings;
  /** A connection for tests' own channels; closed by `dispose`. */
  readonly admin: amqp.ChannelModel;
  /** Starts a consumer with full options (the harness supplies `connect` and `queue`). */
  start(
    handler: RabbitmqConsumerOptions['handler'],
    options?: Partial<Omit<RabbitmqConsumerOptions, 'connect' | 'connection' | 'queue' | 'handler'>>,
  ): Promise<TransportConsumer>;
  /** Publishes raw AMQP messages to the work queue (properties as given). */
  publishRaw(messages: readonly { body: string | Buffer; options?: amqp.Options.Publish }[]): Promise<void>;
  /** Closes the consumers' connections (a network drop): unlike `crash()`, the consumers reconnect. */
  dropConnections(): Promise<void>;
  /** Messages waiting in a queue. */
  messageCount(queue: string): Promise<number>;
}

/** Builds a harness over a new queue on the broker at `AMQP_URL`. */
export async function rabbitmqHarness(options: RabbitmqHarnessOptions = {}): Promise<RabbitmqHarness> {
  const url = amqpUrl();
  const queue = uniqueName('rmq');
  const topology = options.topology ?? TEST_TOPOLOGY;
  const admin = await amqp.connect(url);
  admin.on('error', () => undefined);
  const channel = await admin.createConfirmChannel();
  channel.on('error', () => undefined);
  const declared = await declareTopology(channel, { ...topology, queue });
  const dlq = rabbitmqDeadLetterQueue({ connection: admin, queue });

  /** One "process" per started consumer: a crash kills its connections and keeps it from reconnecting. */
  const processes = new Set<{ dead: boolean; connections: Set<amqp.ChannelModel> }>();
  const consumers = new Set<TransportConsumer>();
  const connectFor =
    (proc: { dead: boolean; connections: Set<amqp.ChannelModel> }) => async (): Promise<AmqpConnection> => {
      if (proc.dead) throw new Error('harness crash: this consumer process is dead');
      const connection = await amqp.connect(url);
      proc.connections.add(connection);
      connection.on('close', () => proc.connections.delete(connection));
      return connection;
    };

  const start: RabbitmqHarness['start'] = async (handler, consumerOptions = {}) => {
    const proc = { dead: false, connections: new Set<amqp.ChannelModel>() };
    processes.add(proc);
    const consumer = rabbitmqConsumer({
      connect: connectFor(proc),
      queue,
      handler,
      topology,
      reconnect: { initialDelayMs: 100, maxDelayMs: 1_000 },
      ...options.consumer,
      ...consumerOptions,
    });
    await consumer.start();
    consumers.add(consumer);
    return consumer;
  };

  const publishRaw: RabbitmqHarness['publishRaw'] = async (messages) => {
    for (const m of messages) {
      channel.sendToQueue(queue, typeof m.body === 'string' ? Buffer.from(m.body) : m.body, {
        persistent: true,
        ...m.options,
      });
    }
    await channel.waitForConfirms();
  };

  return {
    queue,
    topology,
    admin,
    start,
    async startConsumer(
      consumer: IdempotentConsumer<unknown, unknown>,
      consumerOptions: HarnessConsumerOptions = {},
    ) {
      return start(consumer, {
        ...(consumerOptions.concurrency !== undefined ? { concurrency: consumerOptions.concurrency } : {}),
        ...(consumerOptions.closeTimeoutMs !== undefined
          ? { closeTimeoutMs: consumerOptions.closeTimeoutMs }
          : {}),
      });
    },
    async publish(messages: readonly HarnessMessage[]) {
      await publishRaw(
        messages.map((m) => ({
          body: typeof m.body === 'string' ? m.body : Buffer.from(m.body),
          options: {
            ...(m.id !== undefined ? { messageId: m.id } : {}),
            headers: { ...m.headers },
            persistent: true,
          },
        })),
      );
    },
    publishRaw,
    oversizedDeadLetter(id: string): HarnessMessage {
      // 62,000 bytes of headers (as oversized-copies.test.ts): with the 2,000-character error and its stack the
      // full dead letter is over amqplib's 64 KiB header table, the compact one (no stack, 500 characters) under.
      const headers: Record<string, string> = {};
      for (let i = 0; tableBytes(headers) + 10_000 < 62_000; i++) headers[`x-blob-${i}`] = 'b'.repeat(9_000);
      headers['x-blob-last'] = '';
      headers['x-blob-last'] = 'b'.repeat(62_000 - tableBytes(headers));
      return { id, body: JSON.stringify({ kind: 'oversized' }), headers };
    },
    async readDeadLetters(count: number, timeoutMs: number): Promise<DeadLetterEntry[]> {
      const deadline = Date.now() + timeoutMs;
      const letters: DeadLetterEntry[] = [];
      while (letters.length < count) {
        for await (const taken of dlq.take({ limit: count - letters.length })) {
          letters.push({ id: taken.id, body: taken.body, headers: taken.headers, position: taken.position });
          await taken.remove();
        }
        if (letters.length >= count || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return letters;
    },
    async crash() {
      // Closing the connection is what the broker sees when a process dies: every unacked delivery goes back
      // to the queue. The dead consumer never reconnects; a consumer started later is a new process.
      const closing: Promise<void>[] = [];
      for (const proc of processes) {
        proc.dead = true;
        for (const c of proc.connections) closing.push(c.close().catch(() => undefined));
      }
      await Promise.all(closing);
    },
    async dropConnections() {
      const closing: Promise<void>[] = [];
      for (const proc of processes)
        for (const c of proc.connections) closing.push(c.close().catch(() => undefined));
      await Promise.all(closing);
    },
    async messageCount(name: string) {
      const ch = await admin.createChannel();
      try {
        return (await ch.checkQueue(name)).messageCount;
      } finally {
        await ch.close();
      }
    },
    async dispose() {
      await Promise.allSettled([...consumers].map((c) => c.stop()));
      await dlq.close();
      const ch = await admin.createChannel();
      ch.on('error', () => undefined);
      for (const name of [
        queue,
        declared.deadLetterQueue,
        ...declared.delayBucketsMs.map((b) => declared.delayQueue(b)),
      ]) {
        await ch.deleteQueue(name).catch(() => undefined);
      }
      await ch.deleteExchange(declared.deadLetterExchange).catch(() => undefined);
      await admin.close().catch(() => undefined);
    },
  };
}

/** AMQP field-table bytes of string headers: 4 for the length, then per entry name length, name, 'S', length, value. */
function tableBytes(headers: Record<string, string>): number {
  let n = 4;
  for (const [k, v] of Object.entries(headers)) n += 1 + Buffer.byteLength(k) + 1 + 4 + Buffer.byteLength(v);
  return n;
}
