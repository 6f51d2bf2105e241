// The demo on Kafka: fresh topics per run (source with 3 partitions, DLQ), @inboxkit/kafka's consumer,
// publisher and DLQ reader on one kafkajs client.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher } from '@inboxkit/core';
import { kafkaConsumer, kafkaDeadLetterQueue, kafkaPublisher } from '@inboxkit/kafka';
import type { KafkaTransportConsumer } from '@inboxkit/kafka';
import { uniqueName } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';
import type { Consumer } from 'kafkajs';

import type { DeliveryCounts, DemoCrashSeam, DemoTransport } from '../demo-transport.js';
import { FaultInjector } from '../fault-injector.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Short group timings: joins and rebalances take a second, not ten, against a local broker. */
const FAST_GROUP = {
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
  rebalanceTimeout: 4_000,
  maxWaitTimeInMs: 100,
};

export class KafkaDemoTransport implements DemoTransport {
  readonly name = 'kafka' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'kafka';
  readonly publisher: Publisher;
  readonly #kafka: Kafka;
  readonly #topic: string;
  readonly #deadLetterTopic: string;
  readonly #groupId = uniqueName('demo-payments');
  readonly #faults = new FaultInjector();
  #running: { transport: KafkaTransportConsumer; consumer: Consumer } | undefined;

  private constructor(kafka: Kafka, topic: string, brokers: readonly string[]) {
    this.#kafka = kafka;
    this.#topic = topic;
    this.#deadLetterTopic = `${topic}.dlq`;
    this.publisher = kafkaPublisher({ kafka });
    this.label = [
      `Kafka at ${brokers.join(',')}: kafkaConsumer, kafkaPublisher, kafkaDeadLetterQueue`,
      `topic ${topic}, DLQ ${this.#deadLetterTopic}`,
    ];
  }

  /** Creates the run's topics. Rejects when the broker cannot be reached. */
  static async open(brokers: readonly string[]): Promise<KafkaDemoTransport> {
    const kafka = new Kafka({
      clientId: 'inboxkit-demo',
      brokers: [...brokers],
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3_000,
      retry: { initialRetryTime: 100, retries: 5, maxRetryTime: 2_000 },
    });
    const topic = uniqueName('demo-payments');
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          // One partition keeps the story's order end to end (and the DLQ's); per-key order holds with more.
          { topic, numPartitions: 1, replicationFactor: 1 },
          { topic: `${topic}.dlq`, numPartitions: 1, replicationFactor: 1 },
        ],
      });
    } finally {
      await admin.disconnect();
    }
    return new KafkaDemoTransport(kafka, topic, brokers);
  }

  async startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void> {
    const kafkaConsumerClient = this.#kafka.consumer({ groupId: this.#groupId, ...FAST_GROUP });
    const transport = kafkaConsumer({
      consumer: kafkaConsumerClient,
      kafka: this.#kafka,
      topics: [this.#topic],
      handler: this.#faults.wrap(consumer),
      fromBeginning: true,
      heartbeatIntervalMs: FAST_GROUP.heartbeatInterval,
    });
    await transport.start();
    this.#running = { transport, consumer: kafkaConsumerClient };
  }

  async stopConsumer(): Promise<void> {
    const running = this.#running;
    this.#running = undefined;
    if (running === undefined) return;
    await running.transport.stop();
    await running.consumer.disconnect();
  }

  async publish(messages: readonly StoryMessage[]): Promise<void> {
    this.#faults.sent(messages);
    await this.publisher.publish(
      messages.map((m) => ({
        destination: this.#topic,
        id: m.id,
        key: m.key,
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
        throw new Error(`timed out waiting for ${deadLetters} dead letters in ${this.#deadLetterTopic}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  deliveryCounts(): DeliveryCounts {
    return this.#faults.counts();
  }

  /** Records in the DLQ topic after the replay group's committed offset: a topic never shrinks. */
  async deadLetterCount(): Promise<number> {
    const admin = this.#kafka.admin();
    await admin.connect();
    try {
      const ends = await admin.fetchTopicOffsets(this.#deadLetterTopic);
      const [committed] = await admin.fetchOffsets({
        groupId: `inboxkit-dlq-replay.${this.#deadLetterTopic}`,
        topics: [this.#deadLetterTopic],
      });
      let count = 0;
      for (const p of ends) {
        const done = committed?.partitions.find((c) => c.partition === p.partition)?.offset ?? '-1';
        const from = Math.max(Number(p.low), Number(done));
        count += Math.max(0, Number(p.high) - from);
      }
      return count;
    } finally {
      await admin.disconnect();
    }
  }

  deadLetterReader(): DeadLetterQueueReader {
    return kafkaDeadLetterQueue({
      kafka: this.#kafka,
      topic: this.#deadLetterTopic,
      idleTimeoutMs: 3_000,
      consumerConfig: FAST_GROUP,
    });
  }

  async close(): Promise<void> {
    await this.stopConsumer().catch(() => undefined);
    await this.publisher.close().catch(() => undefined);
    const admin = this.#kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [this.#topic, this.#deadLetterTopic] }).catch(() => undefined);
    await admin.disconnect();
  }
}
