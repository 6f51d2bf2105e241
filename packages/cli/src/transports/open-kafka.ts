// The CLI's Kafka connection: a kafkajs client from --kafka-brokers, the DLQ reader and publisher of
// @inboxkit/kafka on it.

import { ConfigurationError } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader } from '@inboxkit/core';
import { kafkaDeadLetterQueue, kafkaPublisher } from '@inboxkit/kafka';
import type { KafkaClientLike } from '@inboxkit/kafka';
import { Kafka, logLevel } from 'kafkajs';

import type { OpenedTransport, OpenTransportOptions } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';

/** The replay group of a DLQ topic when `--group` is not given (the Kafka reader's own default). */
export function defaultReplayGroup(topic: string): string {
  return `inboxkit-dlq-replay.${topic}`;
}

/** A kafkajs client for the settings. */
export function kafkaClientFor(settings: ConnectionSettings): Kafka {
  if (settings.kafkaBrokers === undefined || settings.kafkaBrokers.length === 0) {
    throw new ConfigurationError('no Kafka configured: pass --kafka-brokers host:port or set KAFKA_BROKERS');
  }
  return new Kafka({
    clientId: 'inboxkit-cli',
    brokers: [...settings.kafkaBrokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5_000,
    retry: { retries: 3 },
  });
}

/** The replay group's committed offset per partition (the next offset `take` reads). */
async function committedOffsets(kafka: Kafka, topic: string, groupId: string): Promise<Map<number, bigint>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(topic)) {
      throw new ConfigurationError(`Kafka topic ${JSON.stringify(topic)} does not exist: check --from`);
    }
    const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
    const out = new Map<number, bigint>();
    for (const p of offsets.find((t) => t.topic === topic)?.partitions ?? []) {
      if (/^\d+$/.test(p.offset)) out.set(p.partition, BigInt(p.offset));
    }
    return out;
  } finally {
    await admin.disconnect();
  }
}

/**
 * Browsing a Kafka DLQ reads the topic from its start, but `take` starts at the replay group's committed
 * offset: dead letters before it were already replayed and removed. Listing and dry runs skip them, so they
 * show what a replay would take.
 */
function skipRemoved(
  reader: DeadLetterQueueReader,
  committed: ReadonlyMap<number, bigint>,
): DeadLetterQueueReader {
  return {
    nonDestructiveBrowse: reader.nonDestructiveBrowse,
    async *browse({ limit }) {
      // The limit counts what is shown, not what was skipped.
      let shown = 0;
      for await (const entry of reader.browse({ limit: Number.MAX_SAFE_INTEGER })) {
        if (isRemoved(entry, committed)) continue;
        yield entry;
        if (++shown >= limit) return;
      }
    },
    take: (options) => reader.take(options),
    close: () => reader.close(),
  };
}

function isRemoved(entry: DeadLetterEntry, committed: ReadonlyMap<number, bigint>): boolean {
  const match = /:(\d+):(\d+)$/.exec(entry.position);
  if (match === null) return false;
  const at = committed.get(Number(match[1]));
  return at !== undefined && BigInt(match[2]!) < at;
}

/** Opens the Kafka DLQ topic `options.from` and, for a replay, a publisher. */
export async function openKafka(
  settings: ConnectionSettings,
  options: OpenTransportOptions,
): Promise<OpenedTransport> {
  const kafka = kafkaClientFor(settings);
  const groupId = options.group ?? defaultReplayGroup(options.from);
  const committed = await committedOffsets(kafka, options.from, groupId);
  const client: KafkaClientLike = kafka;
  const reader = skipRemoved(
    kafkaDeadLetterQueue({ kafka: client, topic: options.from, groupId }),
    committed,
  );
  const publisher = options.publish ? kafkaPublisher({ kafka: client }) : undefined;
  return {
    reader,
    publisher,
    resolveDestination: async (to) => to,
    close: async () => {
      await publisher?.close().catch(() => undefined);
      await reader.close().catch(() => undefined);
    },
  };
}
