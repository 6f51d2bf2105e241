// The outbox against real Kafka and Postgres: two relays in parallel publish through kafkaPublisher (acks=all);
// a downstream idempotentConsumer applies each committed row once, per-key order holds on the partitions, and
// rows of rolled-back transactions never reach the broker.

import { HEADERS, idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { kafkaPublisher } from '@inboxkit/kafka';
import type { Consumer, Producer } from 'kafkajs';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopics, FAST_GROUP, testKafka } from '../../kafka/test/kafka-harness.js';
import { uniqueTestName } from '../../../test/support/services.js';
import { enqueue, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

describe('outbox relay on Kafka', () => {
  let t: OutboxTestDb;
  const kafka = testKafka();
  const topic = uniqueTestName('outbox-kafka');
  let deleteTopics: () => Promise<void> = async () => {};
  let producer: Producer;
  let consumer: Consumer;
  const received: (InboundMessage & { key: string })[] = [];

  beforeAll(async () => {
    t = await openOutboxDb('outbox_kafka');
    await migrateInbox(t.db, { schema: t.schema.schema });
    await sql`CREATE TABLE ${sql.raw(`"${t.schema.schema}"."effects"`)} (message_id text NOT NULL, k text NOT NULL, n integer NOT NULL)`.execute(t.db);
    deleteTopics = await createTopics(kafka, [{ topic, partitions: 3 }]);
    producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    consumer = kafka.consumer({ groupId: uniqueTestName('outbox-sink'), ...FAST_GROUP });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        received.push({
          id: message.headers?.[HEADERS.messageId]?.toString(),
          key: message.key?.toString() ?? '',
          body: message.value?.toString('utf8') ?? null,
          headers: {},
          source: { transport: 'kafka', destination: topic },
        });
      },
    });
  });
  afterAll(async () => {
    await consumer?.disconnect().catch(() => {});
    await producer?.disconnect().catch(() => {});
    await deleteTopics();
    await t?.close();
  });

  it('two relays in parallel: every committed row reaches the sink once in effect, in order per key', async () => {
    const schema = t.schema.schema;
    const committed: string[] = [];
    for (let batch = 0; batch < 12; batch++) {
      const work = t.db.transaction().execute(async (tx) => {
        const ids: string[] = [];
        for (let i = 0; i < 25; i++) {
          const n = batch * 25 + i;
          ids.push(await enqueue(tx, { publisher: 'kafka', destination: topic, key: `k${n % 6}`, body: JSON.stringify({ n, k: `k${n % 6}` }) }, { schema }));
        }
        if (batch % 4 === 3) throw new Error('rolled back');
        return ids;
      });
      committed.push(...(await work.catch(() => [])));
    }
    expect(committed).toHaveLength(225);

    const relays = [0, 1].map(() =>
      startOutboxRelay({ db: t.db, publishers: { kafka: kafkaPublisher({ producer }) }, schema, pollIntervalMs: 20, rowsPerKey: 10, listen: t.schema.pool }),
    );
    await waitFor(async () => (await t.backlog()) === 0, 60_000);
    await Promise.all(relays.map((r) => r.stop()));
    await waitFor(() => new Set(received.map((m) => m.id)).size >= 225, 60_000);

    const store = new PostgresInboxStore({ db: t.db, schema });
    const sink = idempotentConsumer<{ n: number; k: string }, Transaction<unknown>>({
      name: 'sink',
      store,
      handler: async (message, context) => {
        await sql`INSERT INTO ${sql.raw(`"${schema}"."effects"`)} VALUES (${message.id}, ${message.payload.k}, ${message.payload.n})`.execute(context.tx);
      },
    });
    for (const message of received) await sink.handle(message);

    const { rows } = await sql<{ message_id: string; n: string }>`SELECT message_id, count(*) AS n FROM ${sql.raw(`"${schema}"."effects"`)} GROUP BY message_id`.execute(t.db);
    expect(rows.map((r) => r.message_id).sort()).toEqual([...committed].sort());
    expect(rows.every((r) => Number(r.n) === 1)).toBe(true);
    for (let k = 0; k < 6; k++) {
      const ns = received.filter((m) => m.key === `k${k}`).map((m) => (JSON.parse(String(m.body)) as { n: number }).n);
      expect(ns).toEqual([...ns].sort((a, b) => a - b));
    }
  });
});
