// Runs the orders service against the RabbitMQ and Postgres of `npm run services:up` (or AMQP_URL and
// DATABASE_URL), publishes a few orders with the usual trouble, prints the orders, the stock and the second
// guard's count, and stops the way SIGTERM would. `npm run start -w @inboxkit/example-orders-rabbitmq`

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { rabbitmqPublisher } from '@inboxkit/rabbitmq';
import { OutcomeRecorder } from '@inboxkit/testing';
import amqp from 'amqplib';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import type { OrdersDatabase, SecondGuardEvent } from './orders-consumer.js';
import { startOrdersService } from './orders-service.js';

function setting(name: string): string {
  const file = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  const fromFile = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .map((line) => /^([A-Z_]+)=(.*)$/.exec(line.trim()))
        .find((m) => m?.[1] === name)?.[2]
    : undefined;
  const value = process.env[name] ?? fromFile;
  if (value === undefined || value === '') {
    console.error(`${name} is not set: start the services with \`npm run services:up\`, or set ${name}`);
    process.exit(1);
  }
  return value;
}

const SCHEMA = 'orders_example';
const QUEUE = 'orders-example';
const amqpUrl = setting('AMQP_URL');

const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), options: `-c search_path=${SCHEMA}` });
// An idle pooled connection whose backend goes away (a Postgres restart) is reported here; without a listener
// Node exits. The pool drops the connection and opens a new one on the next checkout.
pool.on('error', (error) => console.warn(`postgres: idle connection lost: ${error.message}`));
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
const db = new Kysely<OrdersDatabase>({ dialect: new PostgresDialect({ pool }) });
const recorder = new OutcomeRecorder();
const guarded: SecondGuardEvent[] = [];
const service = await startOrdersService({
  db,
  inboxSchema: SCHEMA,
  connect: () => amqp.connect(amqpUrl),
  queue: QUEUE,
  consumer: { onSecondGuard: (event) => guarded.push(event), backoff: { initialDelayMs: 200 } },
  onOutcome: recorder.hook,
});
const connection = await amqp.connect(amqpUrl);
const publisher = rabbitmqPublisher({ channel: await connection.createConfirmChannel() });

let stopped = false;
async function shutdown(): Promise<void> {
  if (stopped) return;
  stopped = true;
  await service.stop(); // running handlers finish and are acked; the rest goes back to the queue
  await connection.close();
  await db.destroy();
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

// This run's products and orders.
const run = randomBytes(3).toString('hex');
const sku = (name: string): string => `${name}-${run}`;
await db
  .insertInto('products')
  .values([
    { sku: sku('mug'), available: 10 },
    { sku: sku('poster'), available: 1 },
  ])
  .execute();
const order = (n: number, lines: { sku: string; quantity: number }[]) => ({
  orderNo: `ORD-${run}-${n}`,
  customer: `customer-${n}`,
  placedAt: new Date().toISOString(),
  lines: lines.map((l) => ({ ...l, priceCents: 1_200 })),
});
const orders = [
  order(1, [{ sku: sku('mug'), quantity: 2 }]),
  order(2, [
    { sku: sku('mug'), quantity: 1 },
    { sku: sku('poster'), quantity: 1 },
  ]),
  order(3, [{ sku: sku('poster'), quantity: 1 }]), // the last poster went to order 2: out of stock
  order(4, [{ sku: sku('mug'), quantity: 3 }]),
];
const messages = [
  ...orders.map((o) => ({ id: `msg-${o.orderNo}`, body: o })),
  { id: `msg-${orders[0]!.orderNo}`, body: orders[0]! }, // the same message again: the inbox suppresses it
  { id: `msg-${orders[3]!.orderNo}-retry`, body: orders[3]! }, // the same order under a new id: the order number stops it
];
await publisher.publish(
  messages.map((m) => ({ destination: '', routingKey: QUEUE, id: m.id, body: JSON.stringify(m.body) })),
);
await recorder.waitForCount(messages.length, {
  status: ['processed', 'duplicate', 'dead-letter'],
  timeoutMs: 30_000,
});

console.log(`published ${messages.length} messages for ${orders.length} orders (run ${run})\n`);
for (const id of new Set(messages.map((m) => m.id))) {
  const copies = messages.filter((m) => m.id === id).length;
  const outcomes = recorder
    .outcomes(id)
    .map((o) => (o.status === 'dead-letter' ? `dead-letter (${o.reason}: ${o.error?.message})` : o.status));
  console.log(`${id.padEnd(26)} ${outcomes.join(', ')}${copies > 1 ? `   (published ${copies} times)` : ''}`);
}
const rows = await db
  .selectFrom('orders')
  .select('order_no')
  .where('order_no', 'like', `ORD-${run}-%`)
  .orderBy('order_no')
  .execute();
const stock = await db
  .selectFrom('products')
  .selectAll()
  .where('sku', 'like', `%-${run}`)
  .orderBy('sku')
  .execute();
console.log(`\norders applied: ${rows.map((r) => r.order_no).join(', ')}`);
console.log(
  `stock left:     ${stock.map((s) => `${s.sku} ${s.available}`).join(', ')} (mugs: 10, posters: 1 at the start)`,
);
for (const g of guarded)
  console.log(
    `second guard:   ${g.orderNo} arrived again as ${g.messageId}; applied once, as ${g.firstMessageId}`,
  );
console.log(
  `dead letters: npx inboxkit dlq list --transport rabbitmq --from ${QUEUE}.dlq --schema ${SCHEMA}`,
);
await shutdown();
