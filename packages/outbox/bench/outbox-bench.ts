// The outbox relay against publishing directly from the handler, per broker (Kafka, RabbitMQ, SQS via the
// running services), same run. For each broker and variant, `--handlers` concurrent "handlers" each run a
// transaction that inserts one effect row and:
//   direct — publishes the message from inside the handler (the broker's confirm awaited before the commit:
//            the dual write the outbox removes);
//   outbox — enqueues it (`enqueue(tx, …)`), while one `startOutboxRelay` (batching on: `--batch-size`,
//            LISTEN/NOTIFY) publishes committed rows through the same kind of publisher.
// Throughput: all messages from the first transaction's start to the last broker confirm, handlers unpaced.
// Latency: a second, paced run (`--latency-rate` msg/s, below capacity): for the outbox, from the enqueue's
// commit to the broker's confirm of that message; for direct, from the publish call to its confirm.
// `relay drain` is the relay alone over a backlog already committed (`--messages` rows).
//
//   node --conditions=@inboxkit/source --import tsx packages/outbox/bench/outbox-bench.ts [--quick]
//        [--messages 4000] [--latency-messages 1000] [--latency-rate 300] [--handlers 16] [--batch-size 500]
//        [--only kafka,rabbitmq,sqs]
//
// Prints per broker a line `ratio relay/direct: 0.82× (target ≥ 0.7×)`, then one table
// `| variant | msg/s | p50 ms | p99 ms |`, and a BENCH_RESULT JSON line for the runner.

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import { kafkaPublisher } from '@inboxkit/kafka';
import { rabbitmqPublisher } from '@inboxkit/rabbitmq';
import { sqsPublisher } from '@inboxkit/sqs';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

import { percentile, printResult, setting } from '../../../bench/settings.js';
import { exclusiveOrSharedLockHolder } from '../../../test/torture/transports/rabbitmq-broker-lock.js';
import { formatBenchReport, type BrokerFigures, type Figures } from './bench-report.js';
import { enqueue, migrateOutbox, startOutboxRelay, uuidv7 } from '../src/index.js';
import type { OutboxMessage } from '../src/index.js';

process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

const { values: v } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    messages: { type: 'string' },
    'latency-messages': { type: 'string' },
    'latency-rate': { type: 'string' },
    handlers: { type: 'string', default: '16' },
    'batch-size': { type: 'string', default: '500' },
    'relay-concurrency': { type: 'string', default: '1' },
    only: { type: 'string', default: 'kafka,rabbitmq,sqs' },
  },
  strict: true,
});
const MESSAGES = Number(v.messages ?? (v.quick ? 600 : 5_000));
const LATENCY_MESSAGES = Number(v['latency-messages'] ?? (v.quick ? 300 : 1_500));
const LATENCY_RATE = Number(v['latency-rate'] ?? 300);
const HANDLERS = Number(v.handlers);
const BATCH_SIZE = Number(v['batch-size']);
const RELAY_CONCURRENCY = Number(v['relay-concurrency']);
const BROKERS = v.only.split(',') as ('kafka' | 'rabbitmq' | 'sqs')[];
const TARGET = 0.7;
const BODY = JSON.stringify({ order: 'o-1', amount: 4200, note: 'x'.repeat(120) });

const t00 = performance.now();
const log = (line: string): void => void process.stderr.write(`[+${((performance.now() - t00) / 1000).toFixed(1)}s] ${line}\n`);

const schema = `bench_outbox_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: HANDLERS + 2 });
const relayPool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: 3 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const relayDb = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: relayPool }) });
const effects = sql.table(`${schema}.effects`);

interface Rig {
  readonly name: string;
  readonly destination: string;
  readonly routingKey?: string;
  /** A fresh publisher per variant (the application's usual one for that broker). */
  publisher(): Promise<Publisher>;
  teardown(): Promise<void>;
}

async function kafkaRig(): Promise<Rig> {
  const kafka = new Kafka({ clientId: 'outbox-bench', brokers: setting('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });
  const topic = `bench-outbox-${randomBytes(4).toString('hex')}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 6, replicationFactor: 1 }] });
  const publishers: Publisher[] = [];
  return {
    name: 'kafka',
    destination: topic,
    publisher: async () => {
      const p = kafkaPublisher({ kafka });
      publishers.push(p);
      return p;
    },
    teardown: async () => {
      for (const p of publishers) await p.close().catch(() => undefined);
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    },
  };
}

async function rabbitmqRig(): Promise<Rig> {
  const release = await exclusiveOrSharedLockHolder('shared');
  const connection = await amqp.connect(setting('AMQP_URL'));
  const setup = await connection.createChannel();
  const name = `bench-outbox-${randomBytes(4).toString('hex')}`;
  await setup.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await setup.assertExchange(name, 'direct', { durable: true });
  await setup.bindQueue(name, name, name);
  return {
    name: 'rabbitmq',
    destination: name,
    routingKey: name,
    publisher: async () => rabbitmqPublisher({ channel: await connection.createConfirmChannel() }),
    teardown: async () => {
      await setup.deleteQueue(name).catch(() => undefined);
      await setup.deleteExchange(name).catch(() => undefined);
      await connection.close().catch(() => undefined);
      release();
    },
  };
}

async function sqsRig(): Promise<Rig> {
  const client = new SQSClient({
    endpoint: setting('SQS_ENDPOINT'),
    region: setting('SQS_REGION'),
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: `bench-outbox-${randomBytes(4).toString('hex')}` }));
  return {
    name: 'sqs',
    destination: QueueUrl!,
    publisher: async () => sqsPublisher({ client }),
    teardown: async () => {
      await client.send(new DeleteQueueCommand({ QueueUrl })).catch(() => undefined);
      client.destroy();
    },
  };
}

/** Records when the broker confirmed each message id (the first time: a re-publish does not count again). */
function timed(publisher: Publisher, confirmed: Map<string, number>, onConfirm: () => void): Publisher {
  return {
    async publish(messages: readonly OutgoingMessage[]) {
      await publisher.publish(messages);
      const at = performance.now();
      for (const m of messages) if (!confirmed.has(m.id)) confirmed.set(m.id, at);
      onConfirm();
    },
    close: () => publisher.close(),
  };
}

function outgoing(rig: Rig, id: string): OutboxMessage & { id: string } {
  return { destination: rig.destination, ...(rig.routingKey ? { routingKey: rig.routingKey } : {}), body: BODY, id };
}

/** Runs `count` handler transactions on `HANDLERS` workers; paced at `rate` msg/s when given. */
async function drive(count: number, rate: number | undefined, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: HANDLERS }, async () => {
      for (let i = next++; i < count; i = next++) {
        if (rate !== undefined) {
          const wait = t0 + (i / rate) * 1000 - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        await work(i);
      }
    }),
  );
}

async function direct(rig: Rig, count: number, rate: number | undefined): Promise<{ seconds: number; latencies: number[] }> {
  const publisher = await rig.publisher();
  const latencies: number[] = [];
  const t0 = performance.now();
  await drive(count, rate, async () => {
    await db.transaction().execute(async (tx) => {
      await sql`INSERT INTO ${effects} (variant) VALUES ('direct')`.execute(tx);
      const t = performance.now();
      await publisher.publish([outgoing(rig, uuidv7())]);
      latencies.push(performance.now() - t);
    });
  });
  return { seconds: (performance.now() - t0) / 1000, latencies };
}

async function viaOutbox(rig: Rig, count: number, rate: number | undefined, notify = true): Promise<{ seconds: number; latencies: number[] }> {
  const confirmed = new Map<string, number>();
  const committed = new Map<string, number>();
  let allConfirmed: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allConfirmed = resolve));
  const publisher = timed(await rig.publisher(), confirmed, () => {
    if (confirmed.size >= count) allConfirmed();
  });
  // Without NOTIFY the relay finds rows by polling: every 50 ms.
  const relay = startOutboxRelay({
    db: relayDb,
    schema,
    publishers: { default: publisher },
    ...(notify ? { listen: relayPool } : {}),
    batchSize: BATCH_SIZE,
    concurrency: RELAY_CONCURRENCY,
    pollIntervalMs: notify ? 1_000 : 50,
  });
  const t0 = performance.now();
  await drive(count, rate, async () => {
    const id = uuidv7();
    await db.transaction().execute(async (tx) => {
      await sql`INSERT INTO ${effects} (variant) VALUES ('outbox')`.execute(tx);
      await enqueue(tx, outgoing(rig, id), { schema, notify });
    });
    committed.set(id, performance.now());
  });
  await done;
  const seconds = (performance.now() - t0) / 1000;
  await relay.stop();
  const latencies = [...committed].map(([id, at]) => Math.max(0, confirmed.get(id)! - at));
  await sql`TRUNCATE ${sql.table(`${schema}.outbox`)}`.execute(db);
  return { seconds, latencies };
}

/** The relay alone: `count` rows committed first, then one relay drains them. */
async function drain(rig: Rig, count: number): Promise<number> {
  for (let i = 0; i < count; i += 500) {
    await db.transaction().execute(async (tx) => {
      for (let j = i; j < Math.min(count, i + 500); j++) await enqueue(tx, outgoing(rig, uuidv7()), { schema });
    });
  }
  const confirmed = new Map<string, number>();
  let allConfirmed: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allConfirmed = resolve));
  const publisher = timed(await rig.publisher(), confirmed, () => {
    if (confirmed.size >= count) allConfirmed();
  });
  const t0 = performance.now();
  const relay = startOutboxRelay({ db: relayDb, schema, publishers: { default: publisher }, batchSize: BATCH_SIZE, concurrency: RELAY_CONCURRENCY, pollIntervalMs: 200 });
  await done;
  const seconds = (performance.now() - t0) / 1000;
  await relay.stop();
  await sql`TRUNCATE ${sql.table(`${schema}.outbox`)}`.execute(db);
  return count / seconds;
}

function summarize(throughput: { seconds: number }, count: number, latency: { latencies: number[] }): Figures {
  const sorted = [...latency.latencies].sort((a, b) => a - b);
  return { perSecond: count / throughput.seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

const results: Record<string, BrokerFigures> = {};
const ratios: Record<string, number> = {};
const started = performance.now();
await migrateOutbox(db, { schema });
await sql`CREATE TABLE ${effects} (seq bigserial PRIMARY KEY, variant text NOT NULL)`.execute(db);
try {
  for (const broker of BROKERS) {
    const rig = broker === 'kafka' ? await kafkaRig() : broker === 'rabbitmq' ? await rabbitmqRig() : await sqsRig();
    try {
      log(`${broker}: ready`);
      // A short warm-up of both paths (connections, JIT, the topic's leaders).
      await direct(rig, 50, undefined);
      await viaOutbox(rig, 50, undefined);
      const directRun = await direct(rig, MESSAGES, undefined);
      const outboxRun = await viaOutbox(rig, MESSAGES, undefined);
      const quietRun = await viaOutbox(rig, MESSAGES, undefined, false);
      log(`${broker}: throughput runs done`);
      // Latency below capacity: at most half the slowest variant's throughput.
      const rate = Math.min(LATENCY_RATE, 0.5 * (MESSAGES / Math.max(directRun.seconds, outboxRun.seconds, quietRun.seconds)));
      const latencyMessages = Math.min(LATENCY_MESSAGES, Math.ceil(rate * (v.quick ? 1.5 : 5)));
      log(`${broker}: latency runs at ${rate.toFixed(0)}/s, ${latencyMessages} messages`);
      const directLatency = await direct(rig, latencyMessages, rate);
      const outboxLatency = await viaOutbox(rig, latencyMessages, rate);
      const quietLatency = await viaOutbox(rig, latencyMessages, rate, false);
      log(`${broker}: latency runs done`);
      const drainRate = await drain(rig, MESSAGES);
      const figures: BrokerFigures = {
        direct: summarize(directRun, MESSAGES, directLatency),
        outbox: summarize(outboxRun, MESSAGES, outboxLatency),
        quiet: summarize(quietRun, MESSAGES, quietLatency),
        latencyRate: rate,
        drain: { perSecond: drainRate },
      };
      results[broker] = figures;
      ratios[broker] = figures.outbox.perSecond / figures.direct.perSecond;
      log(`${broker}: direct ${figures.direct.perSecond.toFixed(0)}/s, outbox ${figures.outbox.perSecond.toFixed(0)}/s, without NOTIFY ${figures.quiet.perSecond.toFixed(0)}/s, drain ${drainRate.toFixed(0)}/s`);
    } finally {
      await rig.teardown();
    }
  }
} finally {
  await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(db).catch(() => undefined);
  await relayDb.destroy();
  await db.destroy();
}

process.stdout.write(
  `${formatBenchReport({ messages: MESSAGES, handlers: HANDLERS, batchSize: BATCH_SIZE, target: TARGET, brokers: BROKERS, results })}\n\n(${((performance.now() - started) / 1000).toFixed(0)} s)\n`,
);
printResult({ messages: MESSAGES, handlers: HANDLERS, batchSize: BATCH_SIZE, results, ratios, target: TARGET });
