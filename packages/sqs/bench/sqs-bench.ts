// Throughput and end-to-end latency of sqsConsumer + the Postgres inbox against a plain SQS consumer doing the
// same one-row insert without the inbox, at the same concurrency and batch size, on the test services
// (ElasticMQ, Postgres). Prints messages/s, p50/p99 latency and the inbox/plain ratio (target ≥ 0.85).
//
//   node [--conditions=@inboxkit/source] --import tsx packages/sqs/bench/sqs-bench.ts [--quick] [--concurrency N] [--messages N]

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import {
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
  SendMessageBatchCommand,
} from '@aws-sdk/client-sqs';
import { idempotentConsumer, statementHandler } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

// By package name, as users import it: the built dist/ by default, the TypeScript sources under
// --conditions=@inboxkit/source (`npm run bench -- --source`).
import { createQueues, sqsConsumer } from '@inboxkit/sqs';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    concurrency: { type: 'string', default: '10' },
    messages: { type: 'string' },
    rounds: { type: 'string' },
  },
});
const quick = args.quick;
const concurrency = Number(args.concurrency);
const messages = Number(args.messages ?? (quick ? 3_000 : 20_000));
const rounds = Number(args.rounds ?? (quick ? 1 : 3));
const latencyRate = 200;
const latencySeconds = quick ? 4 : 10;
const batchSize = 10;

function setting(name: string): string {
  if (process.env[name]) return process.env[name];
  const file = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n'))
      if (line.startsWith(`${name}=`)) return line.slice(name.length + 1).trim();
  }
  throw new Error(`${name} is not set: start the services with \`npm run services:up\``);
}

interface DB {
  effects: { message_id: string };
}

// With AWS credentials in the environment (a real SQS), the SDK's own chain and region are used.
const realAws = process.env.AWS_ACCESS_KEY_ID !== undefined || process.env.AWS_PROFILE !== undefined;
const client = realAws
  ? new SQSClient(process.env.SQS_ENDPOINT ? { endpoint: process.env.SQS_ENDPOINT } : {})
  : new SQSClient({
      endpoint: setting('SQS_ENDPOINT'),
      region: 'us-east-1',
      credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
    });
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: concurrency + 2 });
const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
const schema = `bench_sqs_${randomBytes(4).toString('hex')}`;

async function setup(): Promise<void> {
  await migrateInbox(db, { schema });
  await sql
    .raw(`CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, message_id text NOT NULL)`)
    .execute(db);
}

async function newQueue(label: string): Promise<{ queueUrl: string; deadLetterQueueUrl: string }> {
  return createQueues({ client, name: `bench-${label}-${randomBytes(4).toString('hex')}`, maxAttempts: 5 });
}

async function dropQueue(q: { queueUrl: string; deadLetterQueueUrl: string }): Promise<void> {
  for (const url of [q.queueUrl, q.deadLetterQueueUrl])
    await client.send(new DeleteQueueCommand({ QueueUrl: url }));
}

/** Sends `count` messages with ids `<prefix>-<n>` and the send time in the body, 10 requests at a time. */
async function preload(queueUrl: string, prefix: string, count: number): Promise<void> {
  const batches: number[][] = [];
  for (let i = 0; i < count; i += 10)
    batches.push(Array.from({ length: Math.min(10, count - i) }, (_, k) => i + k));
  for (let i = 0; i < batches.length; i += 10) {
    await Promise.all(batches.slice(i, i + 10).map((b) => sendBatch(queueUrl, prefix, b)));
  }
}

async function sendBatch(queueUrl: string, prefix: string, ns: readonly number[]): Promise<void> {
  const sentAt = Date.now();
  await client.send(
    new SendMessageBatchCommand({
      QueueUrl: queueUrl,
      Entries: ns.map((n, i) => ({
        Id: String(i),
        MessageBody: JSON.stringify({ n, sentAt }),
        MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${prefix}-${n}` } },
      })),
    }),
  );
}

/** A consumer under test: started on a queue, it calls `onApplied(sentAt)` after each effect is durable. */
interface Runner {
  stop(): Promise<void>;
}
type Start = (
  queueUrl: string,
  deadLetterQueueUrl: string,
  onApplied: (sentAt: number) => void,
) => Promise<Runner>;

async function insertPlain(messageId: string | undefined): Promise<void> {
  await pool.query(`INSERT INTO "${schema}".effects (message_id) VALUES ($1)`, [messageId]);
}

function sentAtOf(body: string | undefined): number {
  return (JSON.parse(body!) as { sentAt: number }).sentAt;
}

/**
 * The baseline the ratio is taken against: the same pipeline as sqsConsumer without the inbox — full batches
 * received while up to `concurrency + batchSize` messages are held, `concurrency` inserts at once, deletes
 * batched by 10 or after 5 ms.
 */
const plain: Start = async (queueUrl, _dlq, onApplied) => {
  let running = true;
  let held = 0;
  let active = 0;
  let wakers: (() => void)[] = [];
  const wake = () => {
    const waiting = wakers;
    wakers = [];
    for (const w of waiting) w();
  };
  const waitUntil = async (condition: () => boolean) => {
    while (!condition()) await new Promise<void>((resolve) => wakers.push(resolve));
  };
  const pending: { Id: string; ReceiptHandle: string }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const deletes = new Set<Promise<unknown>>();
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    while (pending.length > 0) {
      const entries = pending.splice(0, 10).map((e, i) => ({ ...e, Id: String(i) }));
      const p = client
        .send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }))
        .finally(() => deletes.delete(p));
      deletes.add(p);
    }
  };
  const cap = concurrency + batchSize;
  const pollers = Math.max(1, Math.floor(cap / batchSize));
  const tasks = new Set<Promise<void>>();
  const loops = Array.from({ length: pollers }, async () => {
    while (running) {
      await waitUntil(() => held + batchSize <= cap || !running);
      if (!running) break;
      held += batchSize;
      const { Messages = [] } = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: batchSize,
          WaitTimeSeconds: 1,
          VisibilityTimeout: 30,
          MessageAttributeNames: ['All'],
        }),
      );
      held -= batchSize - Messages.length;
      wake();
      for (const m of Messages) {
        const task = (async () => {
          await waitUntil(() => active < concurrency);
          active++;
          try {
            await insertPlain(m.MessageAttributes?.['message-id']?.StringValue);
            onApplied(sentAtOf(m.Body));
            pending.push({ Id: '', ReceiptHandle: m.ReceiptHandle! });
            if (pending.length >= 10) flush();
            else timer ??= setTimeout(flush, 5);
          } finally {
            active--;
            held--;
            wake();
          }
        })().finally(() => tasks.delete(task));
        tasks.add(task);
      }
    }
  });
  return {
    async stop() {
      running = false;
      wake();
      await Promise.all(loops);
      await Promise.all(tasks);
      flush();
      await Promise.all(deletes);
    },
  };
};

/** For reference: the textbook loop — receive 10, insert each (in parallel), delete the batch, repeat. */
const naive: Start = async (queueUrl, _dlq, onApplied) => {
  let running = true;
  const pollers = Math.max(1, Math.ceil(concurrency / batchSize));
  const loops = Array.from({ length: pollers }, async () => {
    while (running) {
      const { Messages = [] } = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: Math.min(batchSize, concurrency),
          WaitTimeSeconds: 1,
          VisibilityTimeout: 30,
          MessageAttributeNames: ['All'],
        }),
      );
      if (Messages.length === 0) continue;
      await Promise.all(
        Messages.map(async (m) => {
          await insertPlain(m.MessageAttributes?.['message-id']?.StringValue);
          onApplied(sentAtOf(m.Body));
        }),
      );
      await client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
};

/** sqsConsumer over the Postgres inbox, the same insert in the handler's transaction. */
function inboxConsumer(mode: 'message' | 'batch', statements = false): Start {
  return async (queueUrl, deadLetterQueueUrl, onApplied) => {
    const consumer = idempotentConsumer<{ sentAt: number }, Transaction<DB>>({
      name: `bench-${randomBytes(3).toString('hex')}`,
      store: new PostgresInboxStore({ db, schema }),
      // `statements`: the same insert as a statement handler, sent with its claim (docs/core.md): the plain
      // consumer's SQL text and parameter, given compiled, so that the ratio is the inbox's and the transport's
      // cost and not a query builder's (Kysely's insertInto(…).values(…) plus compile costs about 15 µs of CPU a
      // message in a tight loop, several times that on this busy machine).
      handler: statements
        ? statementHandler((message) =>
            CompiledQuery.raw(`INSERT INTO "${schema}".effects (message_id) VALUES ($1)`, [message.id]),
          )
        : async (message, { tx }) => {
            await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id) VALUES (${message.id})`.execute(
              tx,
            );
          },
      hooks: {
        onOutcome: ({ outcome, message }) => {
          if (outcome.status === 'processed') onApplied(sentAtOf(message.body as string));
        },
      },
    });
    const transport = sqsConsumer({
      client,
      queueUrl,
      deadLetterQueueUrl,
      handler: consumer,
      mode,
      concurrency,
      batchSize,
      waitTimeSeconds: 1,
    });
    await transport.start();
    return transport;
  };
}

const inbox = inboxConsumer('message');
const inboxBatch = inboxConsumer('batch');
const statements = inboxConsumer('message', true);
const statementsBatch = inboxConsumer('batch', true);

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Drains a preloaded queue: messages/s from start to the last effect. */
async function throughput(label: string, start: Start, count = messages): Promise<number> {
  const q = await newQueue(label);
  await preload(q.queueUrl, label, count);
  let applied = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  const t0 = performance.now();
  const runner = await start(q.queueUrl, q.deadLetterQueueUrl, () => {
    if (++applied === count) done();
  });
  await all;
  const elapsed = (performance.now() - t0) / 1000;
  await runner.stop();
  await dropQueue(q);
  return count / elapsed;
}

/** Sends at a steady rate below capacity: end-to-end latency from send to durable effect. */
async function latency(label: string, start: Start): Promise<{ p50: number; p99: number }> {
  const q = await newQueue(`${label}-lat`);
  const samples: number[] = [];
  const runner = await start(q.queueUrl, q.deadLetterQueueUrl, (sentAt) => samples.push(Date.now() - sentAt));
  const total = latencyRate * latencySeconds;
  const perTick = latencyRate / 20;
  for (let n = 0; n < total; n += perTick) {
    const tick = sleep(50);
    await sendBatch(
      q.queueUrl,
      `${label}-lat`,
      Array.from({ length: perTick }, (_, k) => n + k),
    );
    await tick;
  }
  while (samples.length < total) await sleep(20);
  await runner.stop();
  await dropQueue(q);
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

const SIDES = { plain, inbox, inboxBatch, statements, statementsBatch, naive } as const;
type Side = keyof typeof SIDES;

async function main(): Promise<void> {
  await setup();
  console.log(
    `SQS bench (ElasticMQ + Postgres): ${messages} messages, concurrency ${concurrency}, batch ${batchSize}, ${rounds} round(s)` +
      (quick ? ' [quick]' : ''),
  );
  // A warm-up pass of every side, not counted: ElasticMQ's JVM (and Node's JIT) speed up over the first
  // thousands of messages, and without it whichever side runs first measured up to half its warm rate.
  for (const side of Object.keys(SIDES) as Side[])
    await throughput(`warm-${side}`, SIDES[side], Math.min(messages, 1_000));
  const rates: Record<Side, number[]> = {
    plain: [],
    inbox: [],
    inboxBatch: [],
    statements: [],
    statementsBatch: [],
    naive: [],
  };
  for (let r = 0; r < rounds; r++) {
    // Alternate the order so neither side always runs on a warmer server.
    const order: Side[] =
      r % 2 === 0
        ? ['plain', 'inbox', 'inboxBatch', 'statements', 'statementsBatch', 'naive']
        : ['statementsBatch', 'statements', 'inboxBatch', 'inbox', 'plain', 'naive'];
    for (const side of order) rates[side].push(await throughput(`${side}${r}`, SIDES[side]));
    console.log(
      `  round ${r + 1}: ` +
        (Object.keys(SIDES) as Side[]).map((side) => `${side} ${rates[side][r]!.toFixed(0)}`).join(', ') +
        ' msg/s',
    );
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const latencies = {
    plain: await latency('plain', plain),
    inbox: await latency('inbox', inbox),
    inboxBatch: await latency('inboxBatch', inboxBatch),
    statements: await latency('statements', statements),
    statementsBatch: await latency('statementsBatch', statementsBatch),
    naive: await latency('naive', naive),
  };
  const label: Record<Side, string> = {
    plain: 'plain consumer, same pipeline, no inbox',
    inbox: "sqsConsumer + Postgres inbox, mode 'message' (default)",
    inboxBatch: "sqsConsumer + Postgres inbox, mode 'batch'",
    statements: "sqsConsumer + Postgres inbox, mode 'message', statementHandler",
    statementsBatch: "sqsConsumer + Postgres inbox, mode 'batch', statementHandler",
    naive: 'textbook loop (receive 10, insert, delete batch)',
  };
  console.log('');
  console.log(`| consumer (concurrency ${concurrency}) | msg/s | p50 ms | p99 ms |`);
  console.log('| --- | ---: | ---: | ---: |');
  for (const side of Object.keys(SIDES) as Side[]) {
    console.log(
      `| ${label[side]} | ${median(rates[side]).toFixed(0)} | ${latencies[side].p50} | ${latencies[side].p99} |`,
    );
  }
  console.log('');
  console.log(
    `ratio inbox/plain: message mode ${(median(rates.inbox) / median(rates.plain)).toFixed(2)}, ` +
      `batch mode ${(median(rates.inboxBatch) / median(rates.plain)).toFixed(2)} (target ≥ 0.85); against the textbook loop: ` +
      `${(median(rates.inbox) / median(rates.naive)).toFixed(2)} and ${(median(rates.inboxBatch) / median(rates.naive)).toFixed(2)}; ` +
      `latency at ${latencyRate} msg/s`,
  );
  console.log(
    `statements/plain: message mode with statementHandler ${(median(rates.statements) / median(rates.plain)).toFixed(2)}, ` +
      `batch mode with statementHandler ${(median(rates.statementsBatch) / median(rates.plain)).toFixed(2)}`,
  );
}

try {
  await main();
} finally {
  await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
  await db.destroy();
  client.destroy();
}
