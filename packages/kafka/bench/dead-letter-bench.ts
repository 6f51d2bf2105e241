// Throughput of kafkaConsumer's `batch` mode when a share of the records are poison: a payload the schema
// refuses is dead-lettered at once (no attempt, no retry), so each such record costs a confirmed produce to
// the DLQ topic (acks -1) before its offset may be committed. The figure to watch is how many produce requests
// that takes (`dlq sends`) against how many dead letters went out (`dead letters`), and what it does to msg/s.
//
//   npx tsx --conditions=@inboxkit/source packages/kafka/bench/dead-letter-bench.ts [--messages N] \
//     [--poison 100,20] [--rounds R] [--partitions P]
//
// N records (unique keys, so a fetch is chunked only by `batchSize`) are produced up front; the clock runs
// from the moment the consumer joined its group to the moment every good record was processed and every
// poison one's dead letter was confirmed by the broker. The DLQ producer is the consumer's own (created from
// `kafka`), wrapped to count its requests. Settings come from the environment or .services/env. The last line
// is the figures as JSON (BENCH_RESULT …), one entry per poison share and round.

import { parseArgs } from 'node:util';

import { idempotentConsumer } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { Kafka, logLevel } from 'kafkajs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

import { printResult, setting } from '../../../bench/settings.js';
import { kafkaConsumer } from '../src/index.js';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '2000' },
    poison: { type: 'string', default: '100,20' },
    rounds: { type: 'string', default: '1' },
    partitions: { type: 'string', default: '2' },
  },
});
const MESSAGES = Number(args.messages);
const SHARES = args.poison.split(',').map(Number);
const ROUNDS = Number(args.rounds);
const PARTITIONS = Number(args.partitions);

const kafka = new Kafka({
  clientId: 'inboxkit-dead-letter-bench',
  brokers: setting('KAFKA_BROKERS').split(','),
  logLevel: logLevel.NOTHING,
});
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: PARTITIONS + 2 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const schema = `bench_kafka_dlq_${process.pid}`;

interface Payload {
  readonly n: number;
  readonly ok: boolean;
}

/** Accepts `{ ok: true }` only: the poison records fail validation and go straight to the DLQ. */
const payloadSchema = {
  safeParse(value: unknown): { success: true; data: Payload } | { success: false; error: unknown } {
    const payload = value as Payload;
    return payload?.ok === true
      ? { success: true, data: payload }
      : { success: false, error: { issues: [{ message: 'poison record' }] } };
  },
};

/** Counts what must happen before a run is over: good records processed, dead letters confirmed. */
class Tally {
  processed = 0;
  sends = 0;
  deadLetters = 0;
  #target = Number.POSITIVE_INFINITY;
  #resolve: () => void = () => undefined;

  expect(target: number): Promise<void> {
    this.processed = this.sends = this.deadLetters = 0;
    this.#target = target;
    return new Promise((resolve) => (this.#resolve = resolve));
  }

  check(): void {
    if (this.processed + this.deadLetters >= this.#target) this.#resolve();
  }
}

/** `kafka` whose producers count their `sendBatch` requests and the records they confirmed. */
function countingKafka(tally: Tally): Kafka {
  const wrapProducer = (producer: object): object =>
    new Proxy(producer, {
      get(target, name) {
        const value: unknown = Reflect.get(target, name);
        if (typeof value !== 'function') return value;
        if (name !== 'sendBatch') return (value as (...a: unknown[]) => unknown).bind(target);
        return async (batch: { topicMessages: { messages: unknown[] }[] }) => {
          tally.sends += 1;
          const result: unknown = await (value as (b: unknown) => Promise<unknown>).call(target, batch);
          tally.deadLetters += batch.topicMessages.reduce((n, t) => n + t.messages.length, 0);
          tally.check();
          return result;
        };
      },
    });
  return new Proxy(kafka, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name);
      if (typeof value !== 'function') return value;
      if (name === 'producer')
        return (...a: unknown[]) => wrapProducer((value as (...b: unknown[]) => object).apply(target, a));
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

async function withTopics<T>(topic: string, run: () => Promise<T>): Promise<T> {
  const admin = kafka.admin();
  await admin.connect();
  const topics = [topic, `${topic}.dlq`];
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic, numPartitions: PARTITIONS },
        { topic: `${topic}.dlq`, numPartitions: 1 },
      ],
    });
    return await run();
  } finally {
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  }
}

interface Run {
  readonly poisonShare: number;
  readonly messages: number;
  readonly poison: number;
  readonly seconds: number;
  readonly perSecond: number;
  /** This process's CPU (user + system) over the run, per record. */
  readonly cpuMicrosPerMessage: number;
  readonly dlqSends: number;
  readonly deadLetters: number;
}

let runId = 0;

async function once(poisonShare: number): Promise<Run> {
  runId += 1;
  const topic = `bench-dlq-${process.pid}-${runId}`;
  const poisonEvery = poisonShare <= 0 ? 0 : Math.round(100 / poisonShare);
  const isPoison = (n: number): boolean => poisonEvery > 0 && n % poisonEvery === 0;
  return withTopics(topic, async () => {
    const producer = kafka.producer();
    await producer.connect();
    let poison = 0;
    for (let from = 0; from < MESSAGES; from += 1_000) {
      const messages = [];
      for (let n = from; n < Math.min(MESSAGES, from + 1_000); n += 1) {
        if (isPoison(n)) poison += 1;
        messages.push({
          key: `k-${n}`,
          value: JSON.stringify({ n, ok: !isPoison(n) }),
          headers: { 'message-id': `${topic}-${n}` },
        });
      }
      await producer.send({ topic, acks: -1, messages });
    }
    await producer.disconnect();

    const tally = new Tally();
    const done = tally.expect(MESSAGES);
    const handler = idempotentConsumer<Payload, unknown>({
      name: `bench-dlq-${runId}`,
      store: new PostgresInboxStore<unknown>({ db, schema }),
      schema: payloadSchema,
      maxAttempts: 1,
      handler: async () => undefined,
      hooks: {
        onOutcome: ({ outcome }) => {
          if (outcome.status !== 'processed') return;
          tally.processed += 1;
          tally.check();
        },
      },
    });
    const consumer = kafka.consumer({ groupId: `${topic}-group`, maxWaitTimeInMs: 100 });
    const transport = kafkaConsumer({
      consumer,
      kafka: countingKafka(tally),
      topics: [topic],
      handler,
      mode: 'batch',
      partitionConcurrency: PARTITIONS,
      fromBeginning: true,
    });
    await transport.start();
    const started = performance.now();
    const cpu = process.cpuUsage();
    await done;
    const seconds = (performance.now() - started) / 1000;
    const { user, system } = process.cpuUsage(cpu);
    const sends = tally.sends;
    const deadLetters = tally.deadLetters;
    await transport.stop();
    await consumer.disconnect();
    return {
      poisonShare,
      messages: MESSAGES,
      poison,
      seconds,
      perSecond: MESSAGES / seconds,
      cpuMicrosPerMessage: (user + system) / MESSAGES,
      dlqSends: sends,
      deadLetters,
    };
  });
}

async function main(): Promise<void> {
  await migrateInbox(db, { schema });
  const runs: Run[] = [];
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const share of SHARES) {
        const run = await once(share);
        runs.push(run);
        console.log(
          `poison ${String(share).padStart(3)}%  ${run.messages} msgs (${run.poison} poison)  ` +
            `${run.perSecond.toFixed(0).padStart(6)} msg/s  ${run.seconds.toFixed(2)} s  ` +
            `${run.cpuMicrosPerMessage.toFixed(0)} µs CPU/msg  ` +
            `dlq sends ${run.dlqSends} for ${run.deadLetters} dead letters`,
        );
      }
    }
  } finally {
    await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
    await db.destroy();
  }
  printResult({ runs });
}

await main();
