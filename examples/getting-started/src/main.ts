// main.ts: the billing service. Kafka in, Postgres for the inbox and the invoices.
import { startPruner } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { kafkaConsumer } from '@inboxkit/kafka';
import { Kafka } from 'kafkajs';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { billingConsumer } from './billing-consumer.js';
import type { Database } from './billing-consumer.js';

const topic = process.env.ORDERS_TOPIC ?? 'orders';

// 1. Your database, your pool. inboxkit borrows connections and never closes what you gave it.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
// An idle pooled connection whose backend goes away (a Postgres restart) is reported here; without a listener
// Node exits. The pool drops the connection and opens a new one on the next checkout.
pool.on('error', (error) => console.warn(`postgres: idle connection lost: ${error.message}`));
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });

// 2. The inbox tables (inboxkit.inbox, inboxkit.inbox_replays). Safe to run on every start.
await migrateInbox(db);

// 3. The store and the consumer.
const store = new PostgresInboxStore<Database>({ db });
const consumer = billingConsumer({
  store,
  onOutcome: ({ outcome }) => {
    if (outcome.status === 'dead-letter')
      console.warn(`dead-lettered ${outcome.messageId}: ${outcome.reason}`);
  },
});

// 4. The transport: offsets are committed only after the outcome is durable.
const kafka = new Kafka({
  clientId: 'billing',
  brokers: (process.env.KAFKA_BROKERS ?? 'localhost:9092').split(','),
});
const kafkaClientConsumer = kafka.consumer({ groupId: process.env.KAFKA_GROUP ?? 'billing' });
const transport = kafkaConsumer({
  consumer: kafkaClientConsumer,
  kafka, // the transport creates its dead-letter producer from it; dead letters go to `${topic}.dlq`
  topics: [topic],
  handler: consumer,
});
await transport.start();

// 5. Retention: delete completed rows older than the dedupe window (7 days), every minute, one runner at a time.
const pruner = startPruner(store);

// 6. Stop on SIGTERM: finish what is in flight, commit it, then close what you opened.
process.once('SIGTERM', () => {
  void (async () => {
    await transport.stop();
    await kafkaClientConsumer.disconnect();
    await pruner.stop();
    await db.destroy();
  })();
});
console.log(`billing: consuming ${topic}`);
