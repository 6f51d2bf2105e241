// platformaticKafka(): a KafkaClientLike over @platformatic/kafka, so the transport, the outbox publisher, the
// dead-letter producer and the dead-letter reader run on it as they run on kafkajs.

import type {
  KafkaAdminLike,
  KafkaClientLike,
  KafkaConsumerLike,
  KafkaHeaders,
  KafkaOutgoingRecord,
  KafkaProducerLike,
} from '../kafka-client-types.js';
import { platformaticConsumer } from './platformatic-consumer.js';
import { kafkajsShaped } from './platformatic-errors.js';
import type { PlatformaticConsumerAdapterOptions } from './platformatic-consumer.js';
import type {
  PlatformaticAdmin,
  PlatformaticBaseOptions,
  PlatformaticKafkaModule,
  PlatformaticProducer,
} from './platformatic-types.js';

/** Options of `platformaticKafka()`. */
export interface PlatformaticKafkaOptions extends PlatformaticBaseOptions {
  /** How the adapter's consumers batch and buffer records (see PlatformaticConsumerAdapterOptions). */
  readonly adapter?: PlatformaticConsumerAdapterOptions;
}

/**
 * A kafkajs-shaped client (`KafkaClientLike`) whose producers, consumers and admins are @platformatic/kafka
 * clients created with `options` (`clientId`, `bootstrapBrokers`, and any other option of its `Base`: sasl,
 * tls, retries …). Pass it where a kafkajs `Kafka` goes: `kafkaConsumer({ kafka, consumer: kafka.consumer(…) })`,
 * `kafkaPublisher({ kafka })`, `kafkaDeadLetterQueue({ kafka })`. The module is passed in so that
 * @inboxkit/kafka imports no client at run time.
 *
 * Guarantees as with kafkajs: offsets are committed only after durable work; a join restarts the fetch from
 * the committed offsets; commits of a batch fetched before a rebalance are refused. Produced records wait for
 * the acks asked for (the transport and the publisher ask for all replicas). Differences: see docs/kafka.md,
 * "Choosing a client".
 *
 * @example
 * import * as platformatic from '@platformatic/kafka';
 * const kafka = platformaticKafka(platformatic, { clientId: 'payments', bootstrapBrokers: ['localhost:9092'] });
 * const transport = kafkaConsumer({
 *   kafka,
 *   consumer: kafka.consumer({ groupId: 'payments' }),
 *   topics: ['payments'],
 *   handler,
 * });
 */
export function platformaticKafka(
  platformatic: PlatformaticKafkaModule,
  options: PlatformaticKafkaOptions,
): KafkaClientLike {
  if (
    typeof platformatic?.Consumer !== 'function' ||
    typeof platformatic.Producer !== 'function' ||
    typeof platformatic.Admin !== 'function'
  ) {
    throw new TypeError(
      "platformaticKafka: pass the @platformatic/kafka module first: import * as platformatic from '@platformatic/kafka'",
    );
  }
  const { adapter, ...base } = options;
  if (typeof base.clientId !== 'string' || base.clientId === '') {
    throw new TypeError('platformaticKafka: clientId must be a non-empty string');
  }
  if (!Array.isArray(base.bootstrapBrokers) || base.bootstrapBrokers.length === 0) {
    throw new TypeError('platformaticKafka: bootstrapBrokers must list at least one "host:port"');
  }
  return {
    producer: (config = {}) =>
      platformaticProducer(
        new platformatic.Producer({
          ...base,
          ...(config.idempotent !== undefined ? { idempotent: config.idempotent } : {}),
          ...(config.allowAutoTopicCreation !== undefined
            ? { autocreateTopics: config.allowAutoTopicCreation }
            : {}),
        }),
      ),
    consumer: (config): KafkaConsumerLike =>
      platformaticConsumer(
        new platformatic.Consumer({
          ...base,
          groupId: config.groupId,
          autocommit: false,
          ...(config.sessionTimeout !== undefined ? { sessionTimeout: config.sessionTimeout } : {}),
          ...(config.heartbeatInterval !== undefined ? { heartbeatInterval: config.heartbeatInterval } : {}),
          // @platformatic/kafka refuses a rebalanceTimeout below the sessionTimeout (kafkajs does not).
          ...(config.rebalanceTimeout !== undefined
            ? { rebalanceTimeout: Math.max(config.rebalanceTimeout, config.sessionTimeout ?? 0) }
            : {}),
          ...(config.maxWaitTimeInMs !== undefined ? { maxWaitTime: config.maxWaitTimeInMs } : {}),
        }),
        adapter,
      ),
    admin: () => platformaticAdmin(new platformatic.Admin(base)),
  };
}

/** Wraps a @platformatic/kafka `Producer` (default Buffer serializers) as a `KafkaProducerLike`. */
export function platformaticProducer(producer: PlatformaticProducer): KafkaProducerLike {
  return {
    // @platformatic/kafka connects on first use.
    connect: async () => undefined,
    disconnect: () => producer.close(),
    sendBatch: async (batch) => {
      const messages = (batch.topicMessages ?? []).flatMap((t) =>
        t.messages.map((m) => toProduced(t.topic, m)),
      );
      if (messages.length === 0) return [];
      return producer
        .send({ messages, ...(batch.acks !== undefined ? { acks: batch.acks } : {}) })
        .catch((error: unknown) => {
          throw kafkajsShaped(error);
        });
    },
  };
}

function toProduced(
  topic: string,
  m: KafkaOutgoingRecord,
): { topic: string; key?: Buffer; value?: Buffer; headers?: Map<Buffer, Buffer>; timestamp?: bigint } {
  const headers = toHeaderMap(m.headers);
  return {
    topic,
    ...(m.key != null ? { key: toBuffer(m.key) } : {}),
    ...(m.value !== null ? { value: toBuffer(m.value) } : {}),
    ...(headers !== undefined ? { headers } : {}),
    ...(m.timestamp !== undefined ? { timestamp: BigInt(m.timestamp) } : {}),
  };
}

function toBuffer(value: Buffer | string): Buffer {
  return typeof value === 'string' ? Buffer.from(value) : value;
}

/** kafkajs headers as a Map; an array value becomes one header per element (a Map keeps one per Buffer key). */
function toHeaderMap(headers: KafkaHeaders | undefined): Map<Buffer, Buffer> | undefined {
  if (headers === undefined) return undefined;
  const map = new Map<Buffer, Buffer>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) map.set(Buffer.from(name), toBuffer(v));
  }
  return map.size > 0 ? map : undefined;
}

/** Wraps a @platformatic/kafka `Admin` as a `KafkaAdminLike`. */
export function platformaticAdmin(admin: PlatformaticAdmin): KafkaAdminLike {
  return {
    connect: async () => undefined,
    disconnect: () => admin.close(),
    async fetchTopicOffsets(topic) {
      const metadata = await admin.metadata({ topics: [topic] });
      const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
      const partitions = Array.from({ length: count }, (_, i) => i);
      const ask = (timestamp: bigint) =>
        admin.listOffsets({
          topics: [
            { name: topic, partitions: partitions.map((partitionIndex) => ({ partitionIndex, timestamp })) },
          ],
        });
      // -1: the high watermark (next offset), -2: the low one.
      const [high, low] = await Promise.all([ask(-1n), ask(-2n)]);
      const lowOf = new Map(
        low.flatMap((t) => t.partitions).map((p) => [p.partitionIndex, p.offset.toString()] as const),
      );
      return high
        .flatMap((t) => t.partitions)
        .map((p) => ({
          partition: p.partitionIndex,
          offset: p.offset.toString(),
          high: p.offset.toString(),
          low: lowOf.get(p.partitionIndex) ?? '0',
        }))
        .sort((a, b) => a.partition - b.partition);
    },
    async fetchOffsets({ groupId, topics }) {
      const [group] = await admin.listConsumerGroupOffsets({ groups: [groupId] });
      const wanted = topics === undefined ? undefined : new Set(topics);
      return (group?.topics ?? [])
        .filter((t) => wanted === undefined || wanted.has(t.name))
        .map((t) => ({
          topic: t.name,
          partitions: t.partitions.map((p) => ({
            partition: p.partitionIndex,
            offset: p.committedOffset.toString(),
          })),
        }));
    },
    deleteGroups: (groupIds) => admin.deleteGroups({ groups: groupIds }),
  };
}
