// Runs the payments service against the Kafka and Postgres of `npm run services:up` (or KAFKA_BROKERS and
// DATABASE_URL), publishes four payments with the usual trouble, prints what the provider did, and stops the
// way SIGTERM would. `npm run start -w @inboxkit/example-payments-kafka`

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { kafkaPublisher } from '@inboxkit/kafka';
import { OutcomeRecorder } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { DECLINED_CARD, startFakePaymentProvider } from './payment-provider.js';
import type { PaymentsDatabase } from './payments-consumer.js';
import { startPaymentsService } from './payments-service.js';

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

const SCHEMA = 'payments_example';
const TOPIC = 'payments-example';

const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), options: `-c search_path=${SCHEMA}` });
// An idle pooled connection whose backend goes away (a Postgres restart) is reported here; without a listener
// Node exits. The pool drops the connection and opens a new one on the next checkout.
pool.on('error', (error) => console.warn(`postgres: idle connection lost: ${error.message}`));
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
const db = new Kysely<PaymentsDatabase>({ dialect: new PostgresDialect({ pool }) });
const kafka = new Kafka({
  clientId: 'payments-example',
  brokers: setting('KAFKA_BROKERS').split(','),
  logLevel: logLevel.NOTHING,
});
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ waitForLeaders: true, topics: [{ topic: TOPIC }, { topic: `${TOPIC}.dlq` }] });
await admin.disconnect();

const provider = await startFakePaymentProvider();
const recorder = new OutcomeRecorder();
const service = await startPaymentsService({
  db,
  inboxSchema: SCHEMA,
  kafka,
  topic: TOPIC,
  groupId: 'payments-example',
  providerUrl: provider.url,
  consumer: { backoff: { initialDelayMs: 200, jitter: 'none' } },
  onOutcome: recorder.hook,
});

let stopped = false;
async function shutdown(): Promise<void> {
  if (stopped) return;
  stopped = true;
  await service.stop(); // in-flight payments finish and their offsets are committed
  await publisher.close();
  await provider.close();
  await db.destroy();
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

// Four payments of this run: the second double-clicked, the third's first response lost, the fourth declined.
const run = randomBytes(3).toString('hex');
const payments = [1, 2, 3, 4].map((n) => ({
  paymentId: `pay-${run}-${n}`,
  amountCents: n * 1_000,
  currency: 'EUR',
  card: n === 4 ? DECLINED_CARD : 'tok_visa',
}));
provider.loseNextResponse(payments[2]!.paymentId);
const publisher = kafkaPublisher({ kafka });
const messages = [...payments, payments[1]!].map((p) => ({
  destination: TOPIC,
  id: p.paymentId,
  key: p.paymentId,
  body: JSON.stringify(p),
}));
await publisher.publish(messages);
await recorder.waitForCount(messages.length, {
  status: ['processed', 'duplicate', 'dead-letter'],
  timeoutMs: 60_000,
});

console.log(`published ${messages.length} messages for ${payments.length} payments (run ${run})\n`);
for (const p of payments) {
  const outcomes = recorder
    .outcomes(p.paymentId)
    .map((o) =>
      o.status === 'dead-letter' || o.status === 'retry' ? `${o.status} (${o.reason})` : o.status,
    );
  const requests = provider.requests().filter((r) => r.paymentId === p.paymentId);
  const keys = new Set(requests.map((r) => r.idempotencyKey)).size;
  console.log(
    `${p.paymentId}  outcomes: ${outcomes.join(', ').padEnd(38)} provider: ${requests.length} requests, ${keys} key, ${provider.chargesFor(p.paymentId)} charge(s)`,
  );
}
const rows = await db
  .selectFrom('payments')
  .select('payment_id')
  .where('payment_id', 'like', `pay-${run}-%`)
  .execute();
console.log(
  `\npayments table: ${rows.length} rows for this run; provider: ${provider.charges().filter((c) => c.paymentId.includes(run)).length} charges`,
);
console.log(
  `dead letters are in ${TOPIC}.dlq: npx inboxkit dlq list --transport kafka --from ${TOPIC}.dlq --schema ${SCHEMA}`,
);
await shutdown();
