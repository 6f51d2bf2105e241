// The demo on Kafka: fresh topics per run (source with 3 partitions, DLQ), @inboxkit/kafka's consumer,
// publisher and DLQ reader on one kafkajs client.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher, TransportConsumer } from '@inboxkit/core';
import { kafkaConsumer, kafkaDeadLetterQueue, kafkaPublisher } from '@inboxkit/kafka';
import { uniqueName } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';

import { BrokerDemoTransport } from './broker-demo-transport.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Short group timings: joins and rebalances take a second, not ten, against a local broker. */
const FAST_GROUP = {
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
  rebalanceTimeout: 4_000,
  maxWaitTimeInMs: 100,
};

export class KafkaDemoTransport extends BrokerDemoTransport {
  readonly name = 'kafka' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'kafka';
  readonly publisher: Publisher;
  protected readonly deadLetterPlace: string;
  readonly #kafka: Kafka;
  readonly #topic: string;
  readonly #deadLetterTopic: string;
  readonly #groupId = uniqueName('demo-payments');

  private constructor(kafka: Kafka, topic: string, brokers: readonly string[]) {
    super();
    this.#kafka = kafka;
    this.#topic = topic;
    this.#deadLetterTopic = `${topic}.dlq`;
    this.deadLetterPlace = this.#deadLetterTopic;
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

  /** The transport consumer on a kafkajs consumer of its own, which its stop() disconnects. */
  protected transportConsumer<P, Tx>(handler: IdempotentConsumer<P, Tx>): TransportConsumer {
    const client = this.#kafka.consumer({ groupId: this.#groupId, ...FAST_GROUP });
    const transport = kafkaConsumer({
      consumer: client,
      kafka: this.#kafka,
      topics: [this.#topic],
      handler,
      fromBeginning: true,
      heartbeatIntervalMs: FAST_GROUP.heartbeatInterval,
    });
    return {
      start: () => transport.start(),
      stop: async () => {
        await transport.stop();
        await client.disconnect();
      },
    };
  }

  protected async send(messages: readonly StoryMessage[]): Promise<void> {
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
