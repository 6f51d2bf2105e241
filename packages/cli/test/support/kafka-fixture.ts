// The replay suite's Kafka: a fresh source topic (3 partitions) and its `.dlq` topic, a kafkaConsumer in its
// own group feeding the core consumer. The DLQ's depth is what the replay group has not removed yet. The CLI
// under test talks to Kafka through the client library `client` names (--kafka-client).

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import { kafkaConsumer, kafkaDeadLetterQueue, kafkaPublisher } from '@inboxkit/kafka';
import { uniqueName } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';
import type { Consumer } from 'kafkajs';

import type { KafkaClientName } from '../../src/settings/connection-settings.js';
import { defaultReplayGroup } from '../../src/transports/open-kafka.js';
import type { ReplayFixture } from './replay-fixture.js';
import { requireService } from './services.js';

const FAST_GROUP = {
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
  rebalanceTimeout: 4_000,
  maxWaitTimeInMs: 100,
} as const;

/** Fresh topics on the test Kafka; the CLI runs with `--kafka-client client`. */
export async function kafkaFixture(client: KafkaClientName): Promise<ReplayFixture> {
  const brokers = requireService('KAFKA_BROKERS');
  const kafka = new Kafka({
    clientId: uniqueName('cli-test'),
    brokers: brokers.split(','),
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8 },
  });
  const topic = uniqueName('cli-kafka');
  const dlq = `${topic}.dlq`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic, numPartitions: 3, replicationFactor: 1 },
      { topic: dlq, numPartitions: 1, replicationFactor: 1 },
    ],
  });
  const publisher = kafkaPublisher({ kafka });
  let running: { transport: TransportConsumer; consumer: Consumer } | undefined;

  const ends = async (t: string): Promise<Map<number, bigint>> =>
    new Map((await admin.fetchTopicOffsets(t)).map((p) => [p.partition, BigInt(p.high)]));

  /** The replay group's committed offsets of the DLQ. */
  const committed = async (): Promise<Map<number, bigint>> => {
    const offsets = await admin.fetchOffsets({ groupId: defaultReplayGroup(dlq), topics: [dlq] });
    const out = new Map<number, bigint>();
    for (const p of offsets[0]?.partitions ?? [])
      if (/^\d+$/.test(p.offset)) out.set(p.partition, BigInt(p.offset));
    return out;
  };

  const stop = async (): Promise<void> => {
    if (running === undefined) return;
    await running.transport.stop();
    await running.consumer.disconnect();
    running = undefined;
  };

  return {
    transport: 'kafka',
    dlq,
    cliArgs: ['--kafka-brokers', brokers, '--kafka-client', client],
    async start(handler: IdempotentConsumer<unknown, unknown>) {
      const consumer = kafka.consumer({ groupId: uniqueName('cli-group'), ...FAST_GROUP });
      const transport = kafkaConsumer({
        consumer,
        kafka,
        topics: [topic],
        handler,
        fromBeginning: true,
        heartbeatIntervalMs: 500,
        pauseOnFailureMs: 200,
      });
      await transport.start();
      running = { transport, consumer };
    },
    stop,
    async publish(messages) {
      await publisher.publish(
        messages.map((m) => ({ destination: topic, id: m.id, key: m.id, body: m.body })),
      );
    },
    async deadLetters() {
      const reader = kafkaDeadLetterQueue({
        kafka,
        topic: dlq,
        idleTimeoutMs: 2_000,
        consumerConfig: FAST_GROUP,
      });
      const removed = await committed();
      const out: DeadLetterEntry[] = [];
      for await (const entry of reader.browse({ limit: 100_000 })) {
        const [, partition, offset] = /:(\d+):(\d+)$/.exec(entry.position)!;
        if (BigInt(offset!) >= (removed.get(Number(partition)) ?? 0n)) out.push(entry);
      }
      return out;
    },
    async restore(entries) {
      const keyed = entries as readonly (DeadLetterEntry & { key?: string })[];
      await publisher.publish(
        keyed.map((e) => ({
          destination: dlq,
          id: e.id!,
          body: e.body ?? '',
          headers: e.headers,
          ...(e.key !== undefined ? { key: e.key } : {}),
        })),
      );
    },
    async dlqDepth() {
      const removed = await committed();
      let depth = 0n;
      for (const [partition, high] of await ends(dlq)) depth += high - (removed.get(partition) ?? 0n);
      return Number(depth);
    },
    async sourceState() {
      return [...(await ends(topic)).entries()].map(([p, h]) => `${p}:${h}`).join(',');
    },
    async dispose() {
      await stop().catch(() => undefined);
      await publisher.close().catch(() => undefined);
      await admin.deleteTopics({ topics: [topic, dlq] }).catch(() => undefined);
      await admin.deleteGroups([defaultReplayGroup(dlq)]).catch(() => undefined);
      await admin.disconnect();
    },
  };
}
