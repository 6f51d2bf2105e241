// The TransportHarness of the Kafka transport: a fresh topic (3 partitions) and its DLQ on the real broker,
// consumers in one group per harness with short group timings, and a crash that freezes a consumer's commits
// and drops its connection while its handler is still running. The client under test is kafkajs or
// @platformatic/kafka (platformaticKafka()): the harness's consumers, dead-letter producer, test publisher and
// dead-letter reader all go through it; topics are created (and deleted) with kafkajs' admin for both.

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import type { HarnessConsumerOptions, HarnessMessage, TransportHarness } from '@inboxkit/testing';
import { uniqueName } from '@inboxkit/testing';
import * as platformatic from '@platformatic/kafka';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Producer } from 'kafkajs';

import { kafkaConsumer, kafkaDeadLetterQueue, platformaticKafka } from '../src/index.js';
import type {
  KafkaClientLike,
  KafkaConsumerLike,
  KafkaConsumerOptions,
  KafkaProducerLike,
  KafkaRunConfig,
} from '../src/index.js';
import { kafkaBrokers } from './support/kafka-services.js';

/** Group timings that keep joins and rebalances short against the local broker. */
export const FAST_GROUP = Object.freeze({
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
  rebalanceTimeout: 4_000,
  maxWaitTimeInMs: 100,
});

/** A kafkajs client for tests: quiet unless KAFKA_TEST_LOG=debug|info|warn|error. */
export function testKafka(clientId = uniqueName('inboxkit-test')): Kafka {
  const level = { debug: logLevel.DEBUG, info: logLevel.INFO, warn: logLevel.WARN, error: logLevel.ERROR }[
    process.env.KAFKA_TEST_LOG ?? ''
  ];
  return new Kafka({
    clientId,
    brokers: kafkaBrokers(),
    logLevel: level ?? logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 2_000 },
  });
}

/** The Kafka clients the transport's tests run on. */
export const KAFKA_TEST_CLIENTS = ['kafkajs', 'platformatic'] as const;
/** One of `KAFKA_TEST_CLIENTS`. */
export type KafkaTestClient = (typeof KAFKA_TEST_CLIENTS)[number];

/** A platformaticKafka() client for tests. */
export function testPlatformaticKafka(clientId = uniqueName('inboxkit-plt')): KafkaClientLike {
  return platformaticKafka(platformatic, {
    clientId,
    bootstrapBrokers: kafkaBrokers(),
    retries: 8,
    retryDelay: 250,
  });
}

/** A test client of the library `client` names. */
export function testClient(client: KafkaTestClient): KafkaClientLike {
  return client === 'kafkajs' ? testKafka() : testPlatformaticKafka();
}

/**
 * Creates topics and waits until every partition has a leader; returns a function that deletes them. A busy
 * broker sometimes answers the leader wait with "does not host this topic-partition": that is retried.
 */
export async function createTopics(
  kafka: Kafka,
  topics: readonly { topic: string; partitions: number; config?: Readonly<Record<string, string>> }[],
): Promise<() => Promise<void>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const names = topics.map((t) => t.topic);
    const deadline = Date.now() + 30_000;
    await admin
      .createTopics({
        waitForLeaders: true,
        topics: topics.map((t) => ({
          topic: t.topic,
          numPartitions: t.partitions,
          replicationFactor: 1,
          configEntries: Object.entries(t.config ?? {}).map(([name, value]) => ({ name, value })),
        })),
      })
      .catch((error: unknown) => {
        if (Date.now() > deadline) throw error;
      });
    for (;;) {
      const ready = await admin
        .fetchTopicMetadata({ topics: names })
        .then(({ topics: found }) =>
          topics.every((t) => {
            const meta = found.find((f) => f.name === t.topic);
            return meta?.partitions.length === t.partitions && meta.partitions.every((p) => p.leader >= 0);
          }),
        )
        .catch(() => false);
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`topics ${names.join(', ')} have no leaders after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await admin.disconnect();
  }
  return async () => {
    const a = kafka.admin();
    await a.connect();
    await a.deleteTopics({ topics: topics.map((t) => t.topic) }).catch(() => undefined);
    await a.disconnect();
  };
}

/** An idempotent test producer, connected. */
export async function connectedProducer(kafka: Kafka): Promise<Producer> {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  return producer;
}

/** Publishes harness messages with acks from all replicas: `id` as the `message-id` header, `key` as the key. */
export async function publish(
  producer: KafkaProducerLike,
  topic: string,
  messages: readonly HarnessMessage[],
): Promise<void> {
  await producer.sendBatch({
    acks: -1,
    topicMessages: [
      {
        topic,
        messages: messages.map((m) => ({
          key: m.key ?? null,
          value: typeof m.body === 'string' ? m.body : Buffer.from(m.body),
          headers: { ...m.headers, ...(m.id !== undefined ? { 'message-id': m.id } : {}) },
        })),
      },
    ],
  });
}

/** Records in a topic right now (sum of high - low over partitions). */
export async function topicSize(kafka: KafkaClientLike, topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}

/** Waits until `topic` holds `count` records (or the timeout), then reads them all with the DLQ reader. */
export async function readTopic(
  kafka: KafkaClientLike,
  topic: string,
  count: number,
  timeoutMs: number,
): Promise<DeadLetterEntry[]> {
  const deadline = Date.now() + timeoutMs;
  while ((await topicSize(kafka, topic)) < count && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  const reader = kafkaDeadLetterQueue({ kafka, topic, idleTimeoutMs: 3_000, consumerConfig: FAST_GROUP });
  const entries: DeadLetterEntry[] = [];
  for await (const entry of reader.browse({ limit: 100_000 })) entries.push(entry);
  return entries;
}

/** A consumer whose commits can be frozen: after `crash()` nothing it handled is settled any more. */
export interface CrashableConsumer {
  readonly consumer: KafkaConsumerLike;
  crash(): void;
}

/** Wraps a consumer (of either client) so a simulated crash stops every commit and ends batches at once. */
export function crashable(consumer: KafkaConsumerLike): CrashableConsumer {
  let crashed = false;
  const wrapped: KafkaConsumerLike = {
    connect: () => consumer.connect(),
    disconnect: () => consumer.disconnect(),
    subscribe: (s) => consumer.subscribe(s),
    stop: () => consumer.stop(),
    commitOffsets: (o) => (crashed ? Promise.reject(new Error('crashed')) : consumer.commitOffsets(o)),
    seek: (p) => consumer.seek(p),
    pause: (t) => consumer.pause(t),
    resume: (t) => consumer.resume(t),
    on: ((event: 'consumer.crash', listener: () => void) =>
      consumer.on(event, listener)) as KafkaConsumerLike['on'],
    run: (config?: KafkaRunConfig) => {
      const eachBatch = config?.eachBatch;
      return consumer.run({
        ...config,
        ...(eachBatch
          ? {
              eachBatch: (payload) =>
                eachBatch({
                  ...payload,
                  // Named: the @platformatic/kafka adapter's payload need not spread its methods.
                  batch: payload.batch,
                  resolveOffset: (o) => payload.resolveOffset(o),
                  heartbeat: () => payload.heartbeat(),
                  isStale: () => payload.isStale(),
                  commitOffsetsIfNecessary: (offsets) =>
                    crashed
                      ? Promise.reject(new Error('crashed: not committing'))
                      : payload.commitOffsetsIfNecessary(offsets),
                  isRunning: () => !crashed && payload.isRunning(),
                }),
            }
          : {}),
      });
    },
  };
  return {
    consumer: wrapped,
    crash: () => {
      crashed = true;
    },
  };
}

/** Options of `kafkaHarness`. */
export interface KafkaHarnessOptions {
  /** The client under test (default kafkajs). */
  readonly client?: KafkaTestClient;
  readonly partitions?: number;
  /** Extra transport options for every consumer the harness starts (mode, batchSize …). */
  readonly transport?: Partial<KafkaConsumerOptions>;
}

/** A harness plus what tests of this package inspect directly. */
export interface KafkaHarness extends TransportHarness {
  /** kafkajs, for what the tests observe or set up beside the client under test (admin, topic configs). */
  readonly kafka: Kafka;
  /** The client under test (`kafka` itself when it is kafkajs). */
  readonly client: KafkaClientLike;
  readonly topic: string;
  readonly deadLetterTopic: string;
  readonly groupId: string;
}

/** The harness's DLQ topic's `max.message.bytes`. */
const DEAD_LETTER_TOPIC_BYTES = 65_536;

/** Builds a harness over fresh topics on the real broker. */
export async function kafkaHarness(options: KafkaHarnessOptions = {}): Promise<KafkaHarness> {
  const kafka = testKafka();
  const client: KafkaClientLike = options.client === 'platformatic' ? testPlatformaticKafka() : kafka;
  const topic = uniqueName(options.client === 'platformatic' ? 'plt-conformance' : 'conformance');
  const deadLetterTopic = `${topic}.dlq`;
  const groupId = uniqueName('group');
  const deleteTopics = await createTopics(kafka, [
    { topic, partitions: options.partitions ?? 3 },
    // 64 KiB records at most: room for every check's dead letters, not for oversizedDeadLetter()'s in full.
    {
      topic: deadLetterTopic,
      partitions: 1,
      config: { 'max.message.bytes': String(DEAD_LETTER_TOPIC_BYTES) },
    },
  ]);
  const producer: KafkaProducerLike =
    options.client === 'platformatic'
      ? client.producer({ idempotent: true })
      : await connectedProducer(kafka);
  if (options.client === 'platformatic') await producer.connect();
  const running = new Set<{ transport: TransportConsumer; consumer: KafkaConsumerLike; crash(): void }>();

  return {
    kafka,
    client,
    topic,
    deadLetterTopic,
    groupId,
    async startConsumer(
      handler: IdempotentConsumer<unknown, unknown>,
      consumerOptions: HarnessConsumerOptions = {},
    ) {
      const consumer = client.consumer({ groupId, ...FAST_GROUP });
      const wrapper = crashable(consumer);
      const transport = kafkaConsumer({
        consumer: wrapper.consumer,
        kafka: client,
        topics: [topic],
        handler,
        fromBeginning: true,
        heartbeatIntervalMs: FAST_GROUP.heartbeatInterval,
        pauseOnFailureMs: 200,
        ...(consumerOptions.concurrency !== undefined
          ? { partitionConcurrency: consumerOptions.concurrency }
          : {}),
        ...(consumerOptions.closeTimeoutMs !== undefined
          ? { closeTimeoutMs: consumerOptions.closeTimeoutMs }
          : {}),
        ...options.transport,
      });
      await transport.start();
      const entry = { transport, consumer, crash: () => wrapper.crash() };
      running.add(entry);
      return {
        start: () => transport.start(),
        stop: async () => {
          running.delete(entry);
          await transport.stop();
          await consumer.disconnect();
        },
      };
    },
    publish: (messages) => publish(producer, topic, messages),
    oversizedDeadLetter: (id) => ({
      // 61,000 bytes of headers: with the 2,000-character error and its stack the full dead letter is over the
      // DLQ topic's 64 KiB, the compact one (no stack, 500 characters) well under it.
      id,
      body: JSON.stringify({ kind: 'oversized' }),
      headers: { 'x-bulk': 'b'.repeat(DEAD_LETTER_TOPIC_BYTES - 4_536) },
    }),
    readDeadLetters: (count, timeoutMs) => readTopic(client, deadLetterTopic, count, timeoutMs),
    async crash() {
      for (const entry of running) {
        entry.crash();
        // Leaves the group once the batch in hand returns; not awaited, as a dying process would not wait.
        void entry.consumer.disconnect().catch(() => undefined);
      }
      running.clear();
    },
    async dispose() {
      await Promise.allSettled(
        [...running].map(async (e) => {
          await e.transport.stop();
          await e.consumer.disconnect();
        }),
      );
      running.clear();
      await producer.disconnect();
      await deleteTopics();
    },
  };
}
