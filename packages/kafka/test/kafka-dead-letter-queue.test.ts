// The DLQ reader against the real broker: browsing consumes nothing; take + remove commits the replay group
// only past a prefix of removed entries, so a released entry is taken again. Every test runs with the reader on
// each Kafka client (kafkajs, and @platformatic/kafka through platformaticKafka()); the dead letters are produced
// and the groups listed with kafkajs.
import { HEADERS, deadLetterHeaders } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import type { Kafka, Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kafkaDeadLetterQueue } from '../src/index.js';
import type { KafkaClientLike, KafkaDeadLetterEntry, KafkaDeadLetterQueueReader } from '../src/index.js';
import {
  FAST_GROUP,
  KAFKA_TEST_CLIENTS,
  connectedProducer,
  createTopics,
  testClient,
  testKafka,
} from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let kafka: Kafka;
let producer: Producer;

let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testKafka();
  producer = await connectedProducer(kafka);
});

afterAll(async () => {
  await producer?.disconnect();
  releaseBroker?.();
});

async function dlqWith(
  count: number,
): Promise<{ topic: string; ids: string[]; cleanup: () => Promise<void> }> {
  const topic = uniqueName('orders.dlq');
  const cleanup = await createTopics(kafka, [{ topic, partitions: 1 }]);
  const ids = Array.from({ length: count }, (_, i) => uniqueName(`dead${i}`));
  await producer.send({
    topic,
    acks: -1,
    messages: ids.map((id, i) => ({
      key: `acct-${i}`,
      value: JSON.stringify({ n: i }),
      headers: deadLetterHeaders({
        originalId: id,
        consumer: 'payments',
        reason: 'max-attempts',
        attempts: 5,
        error: { name: 'Error', message: 'boom' },
        firstFailureAt: new Date(0),
        lastFailureAt: new Date(1),
        deadLetteredAt: new Date(2),
        source: { transport: 'kafka', destination: 'orders', partition: 0, offset: String(i) },
      }),
    })),
  });
  return { topic, ids, cleanup };
}

function reader(
  client: KafkaClientLike,
  topic: string,
  groupId = uniqueName('replay'),
): KafkaDeadLetterQueueReader {
  return kafkaDeadLetterQueue({
    kafka: client,
    topic,
    groupId,
    idleTimeoutMs: 3_000,
    consumerConfig: FAST_GROUP,
  });
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

async function groups(): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return (await admin.listGroups()).groups.map((g) => g.groupId);
  } finally {
    await admin.disconnect();
  }
}

describe.each(KAFKA_TEST_CLIENTS)('kafkaDeadLetterQueue on %s', (clientName) => {
  let client: KafkaClientLike;
  beforeAll(() => {
    client = testClient(clientName);
  });

  it('browses without consuming: the same entries every time, with ids, keys, headers and positions', async () => {
    const { topic, ids, cleanup } = await dlqWith(4);
    const groupId = uniqueName('replay');
    const dlq = reader(client, topic, groupId);
    expect(dlq.nonDestructiveBrowse).toBe(true);
    const first: KafkaDeadLetterEntry[] = await collect(dlq.browse({ limit: 10 }));
    expect(first.map((e) => e.id)).toEqual(ids);
    expect(first.map((e) => e.key)).toEqual(['acct-0', 'acct-1', 'acct-2', 'acct-3']);
    expect(first.map((e) => e.position)).toEqual([0, 1, 2, 3].map((o) => `${topic}:0:${o}`));
    expect(first[0]!.headers[HEADERS.reason]).toBe('max-attempts');
    expect(Buffer.from(first[0]!.body as Uint8Array).toString()).toBe('{"n":0}');
    expect((await collect(dlq.browse({ limit: 10 }))).map((e) => e.id)).toEqual(ids);
    expect((await collect(dlq.browse({ limit: 2 }))).map((e) => e.id)).toEqual(ids.slice(0, 2));
    // This reader's browse groups (the broker is shared: other readers may be browsing meanwhile).
    expect((await groups()).filter((g) => g.startsWith(`${groupId}.browse.`))).toEqual([]);
    await dlq.close();
    await cleanup();
  });

  it('take commits only past removed entries: a released entry, and what follows it, is taken again', async () => {
    const { topic, ids, cleanup } = await dlqWith(5);
    const dlq = reader(client, topic);
    const taken: string[] = [];
    for await (const entry of dlq.take({ limit: 3 })) {
      taken.push(entry.id!);
      if (entry.id === ids[1]) await entry.release();
      else await entry.remove();
    }
    expect(taken).toEqual(ids.slice(0, 3));
    const again: string[] = [];
    for await (const entry of dlq.take({ limit: 10 })) {
      again.push(entry.id!);
      await entry.remove();
    }
    expect(again).toEqual(ids.slice(1));
    expect(await collect(dlq.take({ limit: 10 }))).toEqual([]);
    // Browsing still shows everything: removal is the replay group's position, not deletion.
    expect((await collect(dlq.browse({ limit: 10 }))).map((e) => e.id)).toEqual(ids);
    await cleanup();
  });

  it('refuses to remove an entry once its take has ended', async () => {
    const { topic, cleanup } = await dlqWith(1);
    const dlq = reader(client, topic);
    const entries = [];
    for await (const entry of dlq.take({ limit: 1 })) entries.push(entry);
    await expect(entries[0]!.remove()).rejects.toThrow(/has ended/);
    await cleanup();
  });
});
