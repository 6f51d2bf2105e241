// The Kafka TransportHarness with @platformatic/kafka instead of kafkajs: the transport's consumer, its
// dead-letter producer, the test publisher and the dead-letter reader all go through platformaticKafka(). Only
// the topics are created (and deleted) with kafkajs' admin, as in the kafkajs harness.

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import type { HarnessConsumerOptions, HarnessMessage, TransportHarness } from '@inboxkit/testing';
import { uniqueName } from '@inboxkit/testing';
import * as platformatic from '@platformatic/kafka';

import { kafkaConsumer, kafkaDeadLetterQueue, platformaticKafka } from '../src/index.js';
import type {
  KafkaClientLike,
  KafkaConsumerLike,
  KafkaConsumerOptions,
  KafkaProducerLike,
  KafkaRunConfig,
} from '../src/index.js';
import { FAST_GROUP, createTopics, testKafka } from './kafka-harness.js';
import { kafkaBrokers } from './support/kafka-services.js';

/** A platformaticKafka() client for tests. */
export function testPlatformaticKafka(clientId = uniqueName('inboxkit-plt')): KafkaClientLike {
  return platformaticKafka(platformatic, {
    clientId,
    bootstrapBrokers: kafkaBrokers(),
    retries: 8,
    retryDelay: 250,
  });
}

/** Wraps any KafkaConsumerLike so a simulated crash stops every commit and ends batches at once. */
export function crashableLike(consumer: KafkaConsumerLike): { consumer: KafkaConsumerLike; crash(): void } {
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
  return { consumer: wrapped, crash: () => (crashed = true) };
}

/** Publishes harness messages through a KafkaProducerLike with acks from all replicas. */
export async function publishLike(
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

/** Waits until `topic` holds `count` records (or the timeout), then reads them all with the DLQ reader. */
export async function readTopicLike(
  kafka: KafkaClientLike,
  topic: string,
  count: number,
  timeoutMs: number,
): Promise<DeadLetterEntry[]> {
  const deadline = Date.now() + timeoutMs;
  const admin = kafka.admin();
  try {
    for (;;) {
      const offsets = await admin.fetchTopicOffsets(topic);
      const size = offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
      if (size >= count || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await admin.disconnect();
  }
  const reader = kafkaDeadLetterQueue({ kafka, topic, idleTimeoutMs: 3_000, consumerConfig: FAST_GROUP });
  const entries: DeadLetterEntry[] = [];
  for await (const entry of reader.browse({ limit: 100_000 })) entries.push(entry);
  return entries;
}

/** Options of `platformaticHarness`. */
export interface PlatformaticHarnessOptions {
  readonly partitions?: number;
  readonly transport?: Partial<KafkaConsumerOptions>;
}

/** A harness plus what tests inspect directly. */
export interface PlatformaticHarness extends TransportHarness {
  readonly kafka: KafkaClientLike;
  readonly topic: string;
  readonly deadLetterTopic: string;
  readonly groupId: string;
}

/** Builds a harness over fresh topics on the real broker, every client a @platformatic/kafka one. */
export async function platformaticHarness(
  options: PlatformaticHarnessOptions = {},
): Promise<PlatformaticHarness> {
  const kafka = testPlatformaticKafka();
  const topic = uniqueName('plt-conformance');
  const deadLetterTopic = `${topic}.dlq`;
  const groupId = uniqueName('plt-group');
  const deleteTopics = await createTopics(testKafka(), [
    { topic, partitions: options.partitions ?? 3 },
    { topic: deadLetterTopic, partitions: 1 },
  ]);
  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  const running = new Set<{ transport: TransportConsumer; consumer: KafkaConsumerLike; crash(): void }>();

  return {
    kafka,
    topic,
    deadLetterTopic,
    groupId,
    async startConsumer(
      handler: IdempotentConsumer<unknown, unknown>,
      consumerOptions: HarnessConsumerOptions = {},
    ) {
      const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
      const wrapper = crashableLike(consumer);
      const transport = kafkaConsumer({
        consumer: wrapper.consumer,
        kafka,
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
    publish: (messages) => publishLike(producer, topic, messages),
    readDeadLetters: (count, timeoutMs) => readTopicLike(kafka, deadLetterTopic, count, timeoutMs),
    async crash() {
      for (const entry of running) {
        entry.crash();
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
