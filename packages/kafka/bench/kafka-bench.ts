// Throughput and end-to-end latency of the Kafka transport against plain kafkajs consumers doing the same
// one-row insert without the inbox, side by side on the same broker, database, partitions and concurrency.
//
//   node --import tsx packages/kafka/bench/kafka-bench.ts [--quick] [--messages N] [--client kafkajs,platformatic]
//   (the built package, as users run it: build it first, `npx turbo run build --filter=@inboxkit/kafka`; the
//   TypeScript sources: add --conditions=@inboxkit/source before --import, or `npm run bench -- --only kafka --source`)
//
// Four consumers: plain eachMessage (autoCommit, one INSERT per message) vs kafkaConsumer `message` mode, and
// plain eachBatch (one transaction per fetched batch, autoCommit after it) vs kafkaConsumer `batch` mode. With
// `platformatic` among --client (the default), kafkaConsumer on @platformatic/kafka (platformaticKafka()) runs
// beside them in each mode, reported against the same plain kafkajs consumer.
// Throughput: N messages produced up front, timed from the moment the consumer joined to the last effect.
// Latency: both variants at the same steady rate (half the slower one's throughput), from the produce call to
// the effect being committed. A reference line drives the idempotent consumer directly (no Kafka, same
// concurrency), separating the transport's cost from the inbox's. Settings come from .services/env or the env.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { idempotentConsumer, statementHandler } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import * as platformatic from '@platformatic/kafka';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Producer } from 'kafkajs';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

// By package name, as users import it: the built dist/ by default, the TypeScript sources under
// --conditions=@inboxkit/source.
import { kafkaConsumer, platformaticKafka } from '@inboxkit/kafka';
import type { KafkaClientLike } from '@inboxkit/kafka';

import { createBenchTopics } from './bench-topics.js';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    messages: { type: 'string' },
    partitions: { type: 'string', default: '4' },
    rounds: { type: 'string' },
    client: { type: 'string', default: 'kafkajs,platformatic' },
  },
});
const CLIENTS = new Set(args.client.split(',').map((c) => c.trim()));
for (const c of CLIENTS)
  if (c !== 'kafkajs' && c !== 'platformatic')
    throw new Error(`--client takes kafkajs, platformatic or both (comma-separated), got ${c}`);
const QUICK = args.quick;
const MESSAGES = Number(args.messages ?? (QUICK ? 4_000 : 20_000));
const PARTITIONS = Number(args.partitions);
const ROUNDS = Number(args.rounds ?? (QUICK ? 1 : 3));
const LATENCY_MESSAGES = QUICK ? 500 : 2_000;
const LATENCY_RATE = 500; // messages per second at most; the latency runs use half the slower variant's throughput

function setting(name: string): string {
  const fromEnv = process.env[name];
  if (fromEnv) return fromEnv;
  const file = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const [key, ...rest] = line.split('=');
      if (key === name) return rest.join('=');
    }
  }
  throw new Error(`${name} is not set: run \`npm run services:up\``);
}

const kafka = new Kafka({
  clientId: 'inboxkit-bench',
  brokers: setting('KAFKA_BROKERS').split(','),
  logLevel: logLevel.NOTHING,
});
/** The same broker through @platformatic/kafka, for kafkaConsumer's platformatic side. */
const platformaticClient: KafkaClientLike = platformaticKafka(platformatic, {
  clientId: 'inboxkit-bench',
  bootstrapBrokers: setting('KAFKA_BROKERS').split(','),
});
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: PARTITIONS + 2 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const schema = `bench_kafka_${process.pid}`;
const effects = `"${schema}"."effects"`;
const insert = `INSERT INTO ${effects} (id, n) VALUES ($1, $2)`;
let runId = 0;

interface Payload {
  readonly n: number;
  readonly sentAt: number;
}

/** Counts effects; resolves `done` at the target; records latency of messages that carry `sentAt`. */
class Meter {
  count = 0;
  first = 0;
  last = 0;
  readonly latencies: number[] = [];
  #target = Number.POSITIVE_INFINITY;
  #resolve: () => void = () => undefined;

  expect(target: number): Promise<void> {
    this.count = 0;
    this.latencies.length = 0;
    this.#target = target;
    return new Promise((resolve) => (this.#resolve = resolve));
  }

  /** Throughput is timed from here (the consumer joined its group and starts fetching). */
  begin(): void {
    this.first = performance.now() + performance.timeOrigin;
  }

  hit(payload: Payload | undefined): void {
    const now = performance.now() + performance.timeOrigin;
    this.count += 1;
    this.last = now;
    if (payload !== undefined && payload.sentAt > 0) this.latencies.push(now - payload.sentAt);
    if (this.count >= this.#target) this.#resolve();
  }
}

interface Variant {
  readonly name: string;
  start(topic: string, groupId: string, meter: Meter): Promise<() => Promise<void>>;
}

function parse(value: Buffer | null): Payload | undefined {
  return value === null ? undefined : (JSON.parse(value.toString('utf8')) as Payload);
}

const plainMessage: Variant = {
  name: 'plain eachMessage',
  async start(topic, groupId, meter) {
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      partitionsConsumedConcurrently: PARTITIONS,
      eachMessage: async ({ message }) => {
        const payload = parse(message.value);
        await pool.query(insert, [message.headers?.['message-id']?.toString(), payload?.n ?? 0]);
        meter.hit(payload);
      },
    });
    return () => consumer.disconnect();
  },
};

const plainBatch: Variant = {
  name: 'plain eachBatch',
  async start(topic, groupId, meter) {
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      partitionsConsumedConcurrently: PARTITIONS,
      eachBatch: async (payload) => {
        const { batch } = payload;
        const client = await pool.connect();
        const payloads: (Payload | undefined)[] = [];
        try {
          await client.query('BEGIN');
          for (const message of batch.messages) {
            const payload = parse(message.value);
            payloads.push(payload);
            await client.query(insert, [message.headers?.['message-id']?.toString(), payload?.n ?? 0]);
          }
          await client.query('COMMIT');
        } finally {
          client.release();
        }
        for (const message of batch.messages) payload.resolveOffset(message.offset);
        for (const p of payloads) meter.hit(p);
        await payload.heartbeat();
      },
    });
    return () => consumer.disconnect();
  },
};

function inboxHandler(name: string, meter: Meter, statements = false) {
  return idempotentConsumer<Payload, Transaction<unknown>>({
    name,
    store: new PostgresInboxStore<unknown>({ db, schema }),
    // `statements`: the same insert as a statement handler, sent with its claim (docs/core.md).
    handler: statements
      ? statementHandler((message) =>
          CompiledQuery.raw(`INSERT INTO ${effects} (id, n) VALUES ($1, $2)`, [
            message.id,
            message.payload.n,
          ]),
        )
      : async (message, context) => {
          await sql`INSERT INTO ${sql.raw(effects)} (id, n) VALUES (${message.id}, ${message.payload.n})`.execute(
            context.tx,
          );
        },
    hooks: {
      onOutcome: ({ outcome, message }) => {
        if (outcome.status === 'processed') meter.hit(parse(message.body as Buffer));
      },
    },
  });
}

function inbox(
  mode: 'message' | 'batch',
  keyConcurrency = 1,
  statements = false,
  client: 'kafkajs' | 'platformatic' = 'kafkajs',
): Variant {
  const on: KafkaClientLike = client === 'platformatic' ? platformaticClient : kafka;
  const extras = [
    ...(client === 'platformatic' ? ['on @platformatic/kafka'] : []),
    ...(keyConcurrency === 1 ? [] : [`keyConcurrency ${keyConcurrency}`]),
    ...(statements ? ['statementHandler'] : []),
  ];
  return {
    name: [`kafkaConsumer ${mode}`, ...extras].join(', '),
    async start(topic, groupId, meter) {
      const handler = inboxHandler(`bench-${groupId}`, meter, statements);
      const consumer = on.consumer({ groupId, maxWaitTimeInMs: 100 });
      const transport = kafkaConsumer({
        consumer,
        kafka: on,
        topics: [topic],
        handler,
        mode,
        partitionConcurrency: PARTITIONS,
        fromBeginning: true,
        keyConcurrency,
      });
      await transport.start();
      return async () => {
        await transport.stop();
        await consumer.disconnect();
      };
    },
  };
}

async function createTopic(topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createBenchTopics(admin, topic, PARTITIONS);
  } finally {
    await admin.disconnect();
  }
}

async function deleteTopic(topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
  await admin.disconnect();
}

async function produce(
  producer: Producer,
  topic: string,
  from: number,
  count: number,
  sentAt: number,
): Promise<void> {
  await producer.send({
    topic,
    acks: -1,
    messages: Array.from({ length: count }, (_, i) => ({
      key: `key-${(from + i) % 1_000}`,
      value: JSON.stringify({ n: from + i, sentAt }),
      headers: { 'message-id': `${topic}-${from + i}` },
    })),
  });
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Throughput over a backlog of MESSAGES, timed from the moment the consumer joined to the last effect. */
/** Messages per second, and this process's CPU time (user + system) per message: steadier on a busy machine. */
interface Throughput {
  readonly perSecond: number;
  readonly cpuMicros: number;
}

async function throughput(variant: Variant, producer: Producer): Promise<Throughput> {
  return withTopic(async (topic) => {
    for (let from = 0; from < MESSAGES; from += 1_000)
      await produce(producer, topic, from, Math.min(1_000, MESSAGES - from), 0);
    const meter = new Meter();
    const done = meter.expect(MESSAGES);
    const stop = await variant.start(topic, `${topic}-group`, meter);
    meter.begin();
    const cpu = process.cpuUsage();
    try {
      await done;
      const used = process.cpuUsage(cpu);
      return {
        perSecond: MESSAGES / ((meter.last - meter.first) / 1_000),
        cpuMicros: (used.user + used.system) / MESSAGES,
      };
    } finally {
      await stop();
    }
  });
}

/** End-to-end latency (produce call → effect committed) at a steady `rate`, 10 messages per tick. */
async function latency(
  variant: Variant,
  producer: Producer,
  rate: number,
): Promise<{ p50: number; p99: number }> {
  return withTopic(async (topic) => {
    const meter = new Meter();
    const stop = await variant.start(topic, `${topic}-group`, meter);
    try {
      const paced = meter.expect(LATENCY_MESSAGES);
      for (let sent = 0; sent < LATENCY_MESSAGES; sent += 10) {
        const tick = performance.now();
        await produce(producer, topic, sent, 10, performance.now() + performance.timeOrigin);
        const wait = 10_000 / rate - (performance.now() - tick);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      await paced;
      const sorted = [...meter.latencies].sort((a, b) => a - b);
      return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
    } finally {
      await stop();
    }
  });
}

async function withTopic<T>(work: (topic: string) => Promise<T>): Promise<T> {
  runId += 1;
  const topic = `bench-${process.pid}-${runId}`;
  await createTopic(topic);
  await sql.raw(`TRUNCATE ${effects}`).execute(db);
  try {
    return await work(topic);
  } finally {
    await deleteTopic(topic);
  }
}

/**
 * The idempotent consumer driven directly from memory with the same concurrency, no Kafka: what the inbox
 * itself costs on this machine, so the transport's own share of any gap is visible.
 */
async function withoutKafka(mode: 'message' | 'batch'): Promise<Throughput> {
  await sql.raw(`TRUNCATE ${effects}`).execute(db);
  runId += 1;
  const meter = new Meter();
  const handler = inboxHandler(`direct-${process.pid}-${runId}`, meter);
  const perLane = Math.ceil(MESSAGES / PARTITIONS);
  const message = (lane: number, i: number) => ({
    id: `direct-${runId}-${lane}-${i}`,
    body: Buffer.from(JSON.stringify({ n: i, sentAt: 0 })),
    headers: {},
    source: { transport: 'memory' },
  });
  const started = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: PARTITIONS }, async (_, lane) => {
      if (mode === 'message') {
        for (let i = 0; i < perLane; i += 1) await handler.handle(message(lane, i));
      } else {
        for (let i = 0; i < perLane; i += 500) {
          await handler.handleBatch(
            Array.from({ length: Math.min(500, perLane - i) }, (_, k) => message(lane, i + k)),
          );
        }
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  const total = perLane * PARTITIONS;
  return {
    perSecond: total / ((performance.now() - started) / 1_000),
    cpuMicros: (used.user + used.system) / total,
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function compare(
  plain: Variant,
  ours: Variant,
  mode: 'message' | 'batch',
  producer: Producer,
  target: number,
  extras: readonly Variant[] = [],
): Promise<void> {
  const variants = [plain, ours, ...extras];
  const rates = new Map<Variant, Throughput[]>(variants.map((v) => [v, []]));
  const direct: Throughput[] = [];
  // One pass of the plain consumer and ours first, not counted: the broker's JVM and Node's JIT speed up over
  // the first thousands of messages, and whichever variant ran first would measure that (the SQS bench's plain
  // consumer did: up to half its warm rate).
  await throughput(plain, producer);
  await throughput(ours, producer);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const variant of round % 2 === 0 ? variants : [...variants].reverse())
      rates.get(variant)!.push(await throughput(variant, producer));
    direct.push(await withoutKafka(mode));
  }
  const perSecond = (v: Variant) => median(rates.get(v)!.map((r) => r.perSecond));
  const cpuMicros = (v: Variant) => median(rates.get(v)!.map((r) => r.cpuMicros));
  const a = perSecond(plain);
  const b = perSecond(ours);
  // Both at the same steady rate, half of the slower one's throughput: latency without queueing.
  const rate = Math.max(20, Math.min(LATENCY_RATE, Math.floor(Math.min(a, b) / 2)));
  const la = await latency(plain, producer, rate);
  const lb = await latency(ours, producer, rate);
  const line = (name: string, rate_: number, cpu?: number, l?: { p50: number; p99: number }) =>
    console.log(
      `  ${name.padEnd(44)} ${rate_.toFixed(0).padStart(7)} msg/s` +
        (cpu !== undefined ? `   cpu ${cpu.toFixed(0).padStart(4)} µs/msg` : '') +
        (l
          ? `   p50 ${l.p50.toFixed(1).padStart(6)} ms   p99 ${l.p99.toFixed(1).padStart(6)} ms (at ${rate} msg/s)`
          : ''),
    );
  line(plain.name, a, cpuMicros(plain), la);
  line(ours.name, b, cpuMicros(ours), lb);
  for (const extra of extras)
    line(`${extra.name} (${(perSecond(extra) / a).toFixed(2)}×)`, perSecond(extra), cpuMicros(extra));
  const alone = median(direct.map((d) => d.perSecond));
  line(`(idempotent consumer alone, ${mode})`, alone, median(direct.map((d) => d.cpuMicros)));
  const ratio = b / a;
  console.log(
    `  ratio ${ratio.toFixed(2)}× (target ≥ ${target}×) ${ratio >= target ? 'ok' : 'BELOW TARGET'}`,
  );
  console.log(`  transport share: kafkaConsumer / idempotent consumer alone = ${(b / alone).toFixed(2)}×\n`);
}

async function main(): Promise<void> {
  await migrateInbox(db, { schema });
  await sql.raw(`CREATE TABLE IF NOT EXISTS ${effects} (id text NOT NULL, n integer NOT NULL)`).execute(db);
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  console.log(
    `kafka bench: ${MESSAGES} messages, ${PARTITIONS} partitions (concurrency ${PARTITIONS}), ${ROUNDS} round(s), medians\n`,
  );
  try {
    // @platformatic/kafka needs Node >= 22.22 (on older Nodes it loads, then fails at its first request).
    const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
    const platformaticRuns = major > 22 || (major === 22 && minor >= 22);
    if (CLIENTS.has('platformatic') && !platformaticRuns)
      console.log(`(no @platformatic/kafka side: it needs Node >= 22.22, this is ${process.version})\n`);
    const onPlatformatic = (mode: 'message' | 'batch') =>
      CLIENTS.has('platformatic') && platformaticRuns ? [inbox(mode, 1, false, 'platformatic')] : [];
    console.log('single-message path');
    await compare(plainMessage, inbox('message'), 'message', producer, 0.85, [
      inbox('message', 8),
      inbox('message', 1, true),
      ...onPlatformatic('message'),
    ]);
    console.log('batch path');
    await compare(plainBatch, inbox('batch'), 'batch', producer, 0.9, [
      inbox('batch', 1, true),
      ...onPlatformatic('batch'),
    ]);
  } finally {
    await producer.disconnect();
    await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
    await db.destroy();
  }
}

await main();
