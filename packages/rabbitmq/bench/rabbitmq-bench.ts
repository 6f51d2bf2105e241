// Throughput and end-to-end latency of rabbitmqConsumer + the Postgres inbox against a plain amqplib consumer
// doing the same one-row insert without the inbox, at the same prefetch and concurrency, on the real broker
// and database of `npm run services:up`. Prints messages/s, p50/p99 latency and the inbox/plain ratio.
//
//   node [--conditions=@inboxkit/source] --import tsx packages/rabbitmq/bench/rabbitmq-bench.ts [--quick]
//     [--messages N] [--prefetch 1,16] [--rounds R] [--modes plain,inbox,inbox-batch] [--batch 4]

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { idempotentConsumer, statementHandler } from '@inboxkit/core';
import amqp from 'amqplib';
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';
// By package name, as users import it: the built dist/ by default, the TypeScript sources under
// --conditions=@inboxkit/source (`npm run bench -- --source`).
import { declareTopology, rabbitmqConsumer } from '@inboxkit/rabbitmq';
import type { DeclaredTopology } from '@inboxkit/rabbitmq';
import { amqpUrl, databaseUrl } from '../test/amqp-service.js';
import { createSchema, type EffectsDatabase } from '../test/postgres-fixture.js';
import { PostgresInboxStore } from '@inboxkit/core/postgres';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    messages: { type: 'string' },
    prefetch: { type: 'string', default: '1,16' },
    rounds: { type: 'string' },
    modes: { type: 'string', default: 'plain,inbox,inbox-batch,statements,statements-batch,core-direct' },
    batch: { type: 'string', default: '4' },
  },
});
const quick = args.quick === true;
const messages = Number(args.messages ?? (quick ? 3_000 : 20_000));
const prefetches = args.prefetch.split(',').map(Number);
const rounds = Number(args.rounds ?? (quick ? 1 : 2));
const latencySeconds = quick ? 1.5 : 4;
const modes = args.modes.split(',') as Mode[];
const batchSize = Number(args.batch);

type Mode = 'plain' | 'inbox' | 'inbox-batch' | 'statements' | 'statements-batch' | 'core-direct';

/** The modes whose consumer runs in batches (prefetch / batch lanes). */
const batched = (mode: Mode): boolean => mode === 'inbox-batch' || mode === 'statements-batch';

interface Run {
  readonly mode: Mode;
  readonly prefetch: number;
  readonly perSecond: number;
  /** Latency at half of this mode's own throughput. */
  readonly p50: number;
  readonly p99: number;
}

const url = amqpUrl();
const schema = `bench_rmq_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl(), max: Math.max(...prefetches) + 4 });
pool.on('error', () => undefined);
const db = new Kysely<EffectsDatabase>({ dialect: new PostgresDialect({ pool }) });
await createSchema(db as Kysely<unknown>, schema);
const store = new PostgresInboxStore<EffectsDatabase>({ db, schema });

/** Counts committed effects and records publish-to-commit latencies of the latency phase. */
class Sink {
  count = 0;
  readonly latencies: number[] = [];
  #target = Infinity;
  #done: (() => void) | undefined;

  applied(body: Buffer): void {
    this.count++;
    const sentAt = (JSON.parse(body.toString()) as { sentAt?: number }).sentAt;
    if (sentAt !== undefined) this.latencies.push(performance.now() + performance.timeOrigin - sentAt);
    if (this.count >= this.#target) this.#done?.();
  }

  until(target: number): Promise<void> {
    this.#target = target;
    if (this.count >= target) return Promise.resolve();
    return new Promise((resolve) => (this.#done = resolve));
  }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function publish(
  channel: amqp.ConfirmChannel,
  queue: string,
  from: number,
  count: number,
  stamp: boolean,
) {
  for (let i = 0; i < count; i++) {
    const n = from + i;
    const body = JSON.stringify(stamp ? { n, sentAt: performance.now() + performance.timeOrigin } : { n });
    channel.sendToQueue(queue, Buffer.from(body), { messageId: `m-${n}`, persistent: true });
    if (i % 500 === 499) await channel.waitForConfirms();
  }
  await channel.waitForConfirms();
}

async function start(
  mode: Mode,
  topology: DeclaredTopology,
  prefetch: number,
  sink: Sink,
): Promise<() => Promise<void>> {
  if (mode === 'plain') {
    const connection = await amqp.connect(url);
    const channel = await connection.createChannel();
    await channel.prefetch(prefetch);
    const insert = `INSERT INTO "${schema}".effects (consumer, message_id) VALUES ($1, $2)`;
    await channel.consume(topology.queue, (msg) => {
      if (!msg) return;
      // What a plain amqplib consumer does: up to `prefetch` deliveries in flight, insert, then ack.
      void pool.query(insert, ['plain', String(msg.properties.messageId)]).then(() => {
        channel.ack(msg);
        sink.applied(msg.content);
      });
    });
    return () => connection.close();
  }
  const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
    name: `bench-${topology.queue}`,
    store,
    // `statements` modes: the same insert as a statement handler, sent with its claim (docs/core.md): the plain
    // consumer's SQL text and parameters, given compiled, so that the ratio is the inbox's and the transport's
    // cost and not a query builder's (Kysely's insertInto(…).values(…) plus compile costs about 15 µs of CPU a
    // message in a tight loop, several times that on this busy machine).
    handler:
      mode === 'statements' || mode === 'statements-batch'
        ? statementHandler((message) =>
            CompiledQuery.raw(`INSERT INTO "${schema}".effects (consumer, message_id) VALUES ($1, $2)`, [
              'inbox',
              message.id,
            ]),
          )
        : async (message, { tx }) => {
            await tx
              .withSchema(schema)
              .insertInto('effects')
              .values({ consumer: 'inbox', message_id: message.id })
              .execute();
          },
    hooks: {
      onOutcome: ({ message, outcome }) => {
        if (outcome.status === 'processed') sink.applied(Buffer.from(message.body as Uint8Array));
      },
    },
  });
  const transport = rabbitmqConsumer({
    connect: () => amqp.connect(url),
    queue: topology.queue,
    handler: consumer,
    // Same prefetch; batched: prefetch / batch lanes, up to `batch` messages per inbox transaction.
    concurrency: batched(mode) ? Math.max(1, Math.floor(prefetch / batchSize)) : prefetch,
    maxBatchSize: batched(mode) ? batchSize : 1,
    prefetch,
    topology: { declare: false, delayBucketsMs: topology.delayBucketsMs },
  });
  await transport.start();
  return () => transport.stop();
}

/** The same inbox consumer called directly (no broker) by `prefetch` workers: what the transport adds. */
async function runCoreDirect(prefetch: number): Promise<Run> {
  const n = prefetch === 1 ? Math.ceil(messages / 4) : messages;
  const tag = randomBytes(4).toString('hex');
  const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
    name: `bench-core-${tag}`,
    store,
    handler: async (message, { tx }) => {
      await tx
        .withSchema(schema)
        .insertInto('effects')
        .values({ consumer: 'core', message_id: message.id })
        .execute();
    },
  });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: prefetch }, async () => {
      while (next < n) {
        const i = next++;
        await consumer.handle({
          id: `m-${i}`,
          body: Buffer.from(JSON.stringify({ n: i })),
          headers: {},
          deliveryCount: 1,
          source: { transport: 'rabbitmq', destination: tag },
        });
      }
    }),
  );
  return {
    mode: 'core-direct',
    prefetch,
    perSecond: n / ((performance.now() - t0) / 1000),
    p50: NaN,
    p99: NaN,
  };
}

async function run(mode: Mode, prefetch: number): Promise<Run> {
  if (mode === 'core-direct') return runCoreDirect(prefetch);
  const admin = await amqp.connect(url);
  const channel = await admin.createConfirmChannel();
  const topology = await declareTopology(channel, {
    queue: `bench-${mode}-${randomBytes(4).toString('hex')}`,
    delayBucketsMs: [1_000],
  });
  const n = prefetch === 1 ? Math.ceil(messages / 4) : messages;
  // Throughput: drain a backlog.
  await publish(channel, topology.queue, 0, n, false);
  const sink = new Sink();
  const t0 = performance.now();
  const stop = await start(mode, topology, prefetch, sink);
  await sink.until(n);
  const perSecond = n / ((performance.now() - t0) / 1000);
  // Latency: publish-to-commit at a steady half of this consumer's own throughput (below capacity, so the
  // figure is the path's latency, not queueing).
  const rate = perSecond / 2;
  const total = Math.max(50, Math.round(rate * latencySeconds));
  const tick = 20;
  const perTick = Math.max(1, Math.round((rate * tick) / 1000));
  let sent = 0;
  while (sent < total) {
    const batch = Math.min(perTick, total - sent);
    const started = performance.now();
    await publish(channel, topology.queue, n + sent, batch, true);
    sent += batch;
    await new Promise((r) => setTimeout(r, Math.max(0, tick - (performance.now() - started))));
  }
  await sink.until(n + total);
  await stop();
  for (const q of [topology.queue, topology.deadLetterQueue, topology.delayQueue(1_000)])
    await channel.deleteQueue(q);
  await channel.deleteExchange(topology.deadLetterExchange);
  await admin.close();
  const sorted = [...sink.latencies].sort((a, b) => a - b);
  return { mode, prefetch, perSecond, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

console.log(
  `rabbitmq bench: ${messages} messages (a quarter at prefetch 1), prefetch ${prefetches.join(' and ')}, ` +
    `plain and inbox: concurrency = prefetch; inbox-batch: prefetch / ${batchSize} lanes of up to ${batchSize} ` +
    `messages per transaction; ${rounds} round(s), best throughput of each${quick ? ' (quick)' : ''}`,
);
try {
  for (const prefetch of prefetches) {
    const best: Partial<Record<Mode, Run>> = {};
    for (let r = 0; r < rounds; r++) {
      for (const mode of modes.filter((m) => !batched(m) || prefetch >= batchSize)) {
        const result = await run(mode, prefetch);
        if (!best[mode] || result.perSecond > best[mode].perSecond) best[mode] = result;
      }
    }
    for (const r of [
      best.plain,
      best.inbox,
      best['inbox-batch'],
      best.statements,
      best['statements-batch'],
      best['core-direct'],
    ]) {
      if (!r) continue;
      console.log(
        `  prefetch ${String(r.prefetch).padStart(2)}  ${r.mode.padEnd(16)}  ${r.perSecond.toFixed(0).padStart(6)} msg/s` +
          `  p50 ${r.p50.toFixed(1).padStart(6)} ms  p99 ${r.p99.toFixed(1).padStart(6)} ms`,
      );
    }
    for (const mode of ['inbox', 'inbox-batch'] as const) {
      const r = best[mode];
      const ratio = r && best.plain ? (r.perSecond / best.plain.perSecond).toFixed(2) : undefined;
      if (ratio && mode !== 'inbox-batch' && best['core-direct'] && r) {
        const overhead = (r.perSecond / best['core-direct'].perSecond).toFixed(2);
        console.log(
          `  prefetch ${String(prefetch).padStart(2)}  inbox/core-direct ${overhead}× (what the transport keeps of core's own rate)`,
        );
      }
      if (ratio)
        console.log(`  prefetch ${String(prefetch).padStart(2)}  ${mode}/plain ${ratio}× (target ≥ 0.85×)`);
    }
    for (const mode of ['statements', 'statements-batch'] as const) {
      const r = best[mode];
      if (r && best.plain)
        console.log(
          `  prefetch ${String(prefetch).padStart(2)}  ${mode}/plain ${(r.perSecond / best.plain.perSecond).toFixed(2)}×`,
        );
    }
  }
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await db.destroy();
}
