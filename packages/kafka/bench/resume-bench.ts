// What the careful resume costs: the time from a group join to the last effect over a short backlog, with the
// transport as it is (after a join each partition's first unfinished record runs alone, charged a started
// attempt first; batch mode's chunks restart at 2 and double up to batchSize) and with the careful phase taken
// out (a copy of the sources in which no partition is ever careful: nothing is charged, batches are full from
// the start — and a record that kills its process would loop for ever). Side by side, in alternating order,
// each round on a fresh topic, group and consumer name.
//
//   node --conditions=@inboxkit/source --import tsx packages/kafka/bench/resume-bench.ts \
//     [--rounds 6] [--per-partition 100] [--partitions 6] [--mode message|batch|both]
//
// The copy without the careful phase is written to packages/kafka/bench/.no-careful-src (git-ignored) from
// src/ at each start, two methods of attempt-ledger.ts replaced; the run stops if they are not found. This bench
// compares two versions of the sources, so it runs on the sources (not the built package) by design.

import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { idempotentConsumer } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Producer } from 'kafkajs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

import { kafkaConsumer } from '../src/index.js';
import { createBenchTopics } from './bench-topics.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    'per-partition': { type: 'string', default: '100' },
    partitions: { type: 'string', default: '6' },
    mode: { type: 'string', default: 'both' },
  },
});
const ROUNDS = Number(args.rounds);
const PER_PARTITION = Number(args['per-partition']);
const PARTITIONS = Number(args.partitions);
const MODES: readonly ('message' | 'batch')[] =
  args.mode === 'both' ? ['message', 'batch'] : [args.mode as 'message' | 'batch'];
const BACKLOG = PER_PARTITION * PARTITIONS;

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

/** Writes the sources without the careful phase and loads them. */
async function loadWithoutCareful(): Promise<typeof kafkaConsumer> {
  const from = fileURLToPath(new URL('../src', import.meta.url));
  const to = fileURLToPath(new URL('./.no-careful-src', import.meta.url));
  rmSync(to, { recursive: true, force: true });
  cpSync(from, to, { recursive: true });
  const ledger = `${to}/attempt-ledger.ts`;
  let text = readFileSync(ledger, 'utf8');
  const patches: [RegExp, string][] = [
    [
      /isCareful\(topic: string, partition: number\): boolean \{[^}]*\}/,
      'isCareful(): boolean { return false; }',
    ],
    [
      /chunkLimit\(topic: string, partition: number, batchSize: number\): number \{[^}]*\}/,
      'chunkLimit(_topic: string, _partition: number, batchSize: number): number { return batchSize; }',
    ],
  ];
  for (const [pattern, replacement] of patches) {
    if (!pattern.test(text)) throw new Error(`resume-bench: ${pattern} not found in attempt-ledger.ts`);
    text = text.replace(pattern, replacement);
  }
  writeFileSync(ledger, text);
  const module = (await import(`${to}/index.ts`)) as { kafkaConsumer: typeof kafkaConsumer };
  return module.kafkaConsumer;
}

const kafka = new Kafka({
  clientId: 'inboxkit-resume-bench',
  brokers: setting('KAFKA_BROKERS').split(','),
  logLevel: logLevel.NOTHING,
});
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: PARTITIONS + 2 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const schema = `bench_resume_${process.pid}`;
const effects = `"${schema}"."effects"`;
let runId = 0;

/** Milliseconds from the join (start() resolved) to the last of BACKLOG effects. */
async function drain(
  create: typeof kafkaConsumer,
  mode: 'message' | 'batch',
  producer: Producer,
): Promise<number> {
  runId += 1;
  const topic = `resume-${process.pid}-${runId}`;
  const admin = kafka.admin();
  await admin.connect();
  await createBenchTopics(admin, topic, PARTITIONS);
  try {
    for (let from = 0; from < BACKLOG; from += 500) {
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: Math.min(500, BACKLOG - from) }, (_, i) => ({
          key: `key-${from + i}`,
          value: JSON.stringify({ n: from + i }),
          headers: { 'message-id': `${topic}-${from + i}` },
        })),
      });
    }
    let count = 0;
    let last = 0;
    let resolve: () => void = () => undefined;
    const done = new Promise<void>((r) => (resolve = r));
    const handler = idempotentConsumer<{ n: number }, Transaction<unknown>>({
      name: `resume-${topic}`,
      store: new PostgresInboxStore<unknown>({ db, schema }),
      handler: async (message, context) => {
        await sql`INSERT INTO ${sql.raw(effects)} (id, n) VALUES (${message.id}, ${message.payload.n})`.execute(
          context.tx,
        );
      },
      hooks: {
        onOutcome: ({ outcome }) => {
          if (outcome.status !== 'processed') return;
          count += 1;
          last = performance.now();
          if (count >= BACKLOG) resolve();
        },
      },
    });
    const consumer = kafka.consumer({ groupId: `${topic}-group`, maxWaitTimeInMs: 100 });
    const transport = create({
      consumer,
      kafka,
      topics: [topic],
      handler,
      mode,
      partitionConcurrency: PARTITIONS,
      fromBeginning: true,
    });
    await transport.start();
    const joined = performance.now();
    try {
      await done;
      return last - joined;
    } finally {
      await transport.stop();
      await consumer.disconnect();
    }
  } finally {
    await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
    await admin.disconnect();
  }
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function range(values: readonly number[], digits: number): string {
  return `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
}

async function main(): Promise<void> {
  const withoutCareful = await loadWithoutCareful();
  await migrateInbox(db, { schema });
  await sql.raw(`CREATE TABLE ${effects} (id text NOT NULL, n integer NOT NULL)`).execute(db);
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  process.stdout.write(
    `resume bench: ${BACKLOG} records (${PER_PARTITION} a partition, ${PARTITIONS} partitions) after a join, ${ROUNDS} rounds, alternating order\n`,
  );
  try {
    // An uncounted warm-up of each, so that neither pays the first connections and JIT alone.
    for (const mode of MODES) {
      await drain(kafkaConsumer, mode, producer);
      await drain(withoutCareful, mode, producer);
    }
    for (const mode of MODES) {
      const careful: number[] = [];
      const none: number[] = [];
      const ratios: number[] = [];
      for (let round = 0; round < ROUNDS; round += 1) {
        let a: number;
        let b: number;
        if (round % 2 === 0) {
          a = await drain(kafkaConsumer, mode, producer);
          b = await drain(withoutCareful, mode, producer);
        } else {
          b = await drain(withoutCareful, mode, producer);
          a = await drain(kafkaConsumer, mode, producer);
        }
        careful.push(a);
        none.push(b);
        ratios.push(a / b);
        process.stdout.write(
          `  ${mode} round ${round + 1}: careful ${a.toFixed(0)} ms, without ${b.toFixed(0)} ms\n`,
        );
      }
      process.stdout.write(
        `${mode}: join → last effect, careful resume ${range(careful, 0)} ms, without it ${range(none, 0)} ms; ` +
          `ratio careful/without, pair by pair: ${range(ratios, 2)}\n`,
      );
    }
  } finally {
    await producer.disconnect();
    await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
    await db.destroy();
    rmSync(fileURLToPath(new URL('./.no-careful-src', import.meta.url)), { recursive: true, force: true });
  }
}

await main();
