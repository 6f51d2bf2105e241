// Throughput and end-to-end latency of natsConsumer + the Postgres inbox against a plain JetStream consumer doing
// the same one-row insert without the inbox (consume(), insert, ackAck()), at the same concurrency, on the test
// services (nats-server with JetStream file storage, Postgres). Prints messages/s, p50/p99 latency and the
// inbox/plain ratio.
//
//   node [--conditions=@inboxkit/source] --import tsx packages/nats/bench/nats-bench.ts [--quick] [--concurrency N] [--messages N] [--rounds N] [--side all|inbox|statements|plain]
//
// --side inbox (statements, plain) runs that side's throughput rounds alone, for a CPU profile of one side
// (`node --cpu-prof --import tsx … --side inbox`); no ratio and no latency then.

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { idempotentConsumer, statementHandler } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

// By package name, as users import it: the built dist/ by default, the TypeScript sources under
// --conditions=@inboxkit/source (`npm run bench -- --source`).
import { ensureStreams, natsConsumer } from '@inboxkit/nats';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    concurrency: { type: 'string', default: '10' },
    messages: { type: 'string' },
    rounds: { type: 'string' },
    side: { type: 'string', default: 'all' },
  },
});
const quick = args.quick;
const concurrency = Number(args.concurrency);
const messages = Number(args.messages ?? (quick ? 3_000 : 20_000));
const rounds = Number(args.rounds ?? (quick ? 1 : 3));
if (!['all', 'inbox', 'statements', 'plain'].includes(args.side))
  throw new Error('--side must be all, inbox, statements or plain');
const only = args.side === 'all' ? undefined : (args.side as 'inbox' | 'statements' | 'plain');
const latencyRate = 200;
const latencySeconds = quick ? 4 : 10;

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
  effects: { message_id: string; sent_ms: string; done_ms: string };
}

const schema = `nats_bench_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({
  connectionString: setting('DATABASE_URL'),
  max: concurrency + 4,
  options: `-c search_path=${schema},public`,
});
const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
const nc = await connect({ servers: setting('NATS_URL') });
const js = jetstream(nc);
const jsm = await jetstreamManager(nc);
const streams: string[] = [];

async function freshStream(label: string): Promise<{ stream: string; subject: string; dlqSubject: string }> {
  const base = `${label}_${randomBytes(4).toString('hex')}`;
  const s = { stream: `BENCH_${base}`, subject: `bench.${base}`, dlqSubject: `bench-dlq.${base}` };
  await ensureStreams({
    connection: nc,
    stream: s.stream,
    subjects: [s.subject],
    deadLetterStream: `${s.stream}_DLQ`,
    deadLetterSubject: s.dlqSubject,
  });
  streams.push(s.stream, `${s.stream}_DLQ`);
  return s;
}

/** Publishes `ids`, 256 acknowledgements in flight at a time, each body carrying its send time. */
async function publishAll(subject: string, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 256) {
    await Promise.all(
      ids.slice(i, i + 256).map((id) => {
        const h = headers();
        h.set('message-id', id);
        return js.publish(subject, JSON.stringify({ sent: Date.now() }), { headers: h });
      }),
    );
  }
}

async function countEffects(prefix: string): Promise<number> {
  const r = await sql<{
    n: string;
  }>`SELECT count(*) AS n FROM effects WHERE message_id LIKE ${`${prefix}%`}`.execute(db);
  return Number(r.rows[0]!.n);
}

async function untilApplied(prefix: string, n: number): Promise<void> {
  const deadline = Date.now() + 600_000;
  while ((await countEffects(prefix)) < n) {
    if (Date.now() > deadline) throw new Error(`${prefix}: fewer than ${n} effects after 10 minutes`);
    await sleep(20);
  }
}

/**
 * The one effect every side writes, compiled once: the plain consumer and the inbox handler execute it, the
 * statement handler returns it, so that no side pays a query builder's per-message compile the others do not.
 */
const effect = (id: string, sent: number) =>
  CompiledQuery.raw(
    `INSERT INTO "${schema}".effects (message_id, sent_ms, done_ms) VALUES ($1, $2, (extract(epoch from clock_timestamp()) * 1000)::bigint)`,
    [id, sent],
  );

type Side = 'plain' | 'inbox' | 'statements';

/** Starts one side's consumer on a stream; resolves to its stop function. */
async function startSide(
  side: Side,
  s: { stream: string; dlqSubject: string },
  run: string,
): Promise<() => Promise<void>> {
  if (side === 'inbox' || side === 'statements') {
    const transport = natsConsumer({
      connection: nc,
      stream: s.stream,
      consumer: 'inbox',
      deadLetterSubject: s.dlqSubject,
      concurrency,
      handler: idempotentConsumer<{ sent: number }, Transaction<DB>>({
        name: `bench-${run}`,
        store: new PostgresInboxStore({ db, schema }),
        // `statements`: the same insert as a statement handler, sent with the claim in one round trip
        // (docs/core.md): the inbox's one-round-trip path.
        handler:
          side === 'statements'
            ? statementHandler((message) => effect(message.id, message.payload.sent))
            : async (message, { tx }) => {
                await tx.executeQuery(effect(message.id, message.payload.sent));
              },
      }),
    });
    await transport.start();
    return () => transport.stop();
  }
  // The plain consumer: the textbook loop, `concurrency` handlers, insert then a confirmed ack.
  await jsm.consumers.add(s.stream, {
    durable_name: 'plain',
    ack_policy: AckPolicy.Explicit,
    max_ack_pending: concurrency * 2,
  });
  const consumer = await js.consumers.get(s.stream, 'plain');
  const iterator = await consumer.consume({ max_messages: concurrency * 2 });
  const running = new Set<Promise<void>>();
  const loop = (async () => {
    for await (const m of iterator) {
      const task = (async () => {
        const id = m.headers?.get('message-id') ?? String(m.seq);
        await db.executeQuery(effect(id, m.json<{ sent: number }>().sent));
        await m.ackAck();
      })();
      running.add(task);
      void task.finally(() => running.delete(task));
      if (running.size >= concurrency) await Promise.race(running);
    }
  })();
  return async () => {
    await iterator.close();
    await loop;
    await Promise.allSettled([...running]);
  };
}

/**
 * Messages/s of one side over a backlog of `messages` published beforehand, and the Node CPU (user + system,
 * this whole process: the consumer, the NATS and Postgres clients) per message over the same timed phase.
 */
async function throughput(side: Side, round: number): Promise<{ rate: number; cpuUs: number }> {
  const s = await freshStream(`${side}${round}`);
  const prefix = `${side}-${round}-${randomBytes(3).toString('hex')}-`;
  await publishAll(
    s.subject,
    Array.from({ length: messages }, (_, n) => `${prefix}${n}`),
  );
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const stop = await startSide(side, s, prefix);
  await untilApplied(prefix, messages);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await stop();
  return { rate: messages / seconds, cpuUs: (cpu.user + cpu.system) / messages };
}

/** Sends at a steady rate below capacity: end-to-end latency from the send to the committed effect. */
async function latency(side: Side): Promise<{ p50: string; p99: string }> {
  const s = await freshStream(`${side}lat`);
  const prefix = `${side}-lat-${randomBytes(3).toString('hex')}-`;
  const stop = await startSide(side, s, prefix);
  const total = latencyRate * latencySeconds;
  const t0 = Date.now();
  for (let n = 0; n < total; n++) {
    const due = t0 + (n * 1000) / latencyRate;
    if (due > Date.now()) await sleep(due - Date.now());
    const h = headers();
    h.set('message-id', `${prefix}${n}`);
    void js.publish(s.subject, JSON.stringify({ sent: Date.now() }), { headers: h });
  }
  await untilApplied(prefix, total);
  await stop();
  const r = await sql<{ p50: string; p99: string }>`
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY done_ms - sent_ms) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY done_ms - sent_ms) AS p99
    FROM effects WHERE message_id LIKE ${`${prefix}%`}`.execute(db);
  return { p50: Number(r.rows[0]!.p50).toFixed(1), p99: Number(r.rows[0]!.p99).toFixed(1) };
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  await sql.raw(`CREATE SCHEMA "${schema}"`).execute(db);
  await migrateInbox(db, { schema });
  await sql
    .raw(
      `CREATE TABLE "${schema}".effects (message_id text NOT NULL, sent_ms bigint NOT NULL, done_ms bigint NOT NULL)`,
    )
    .execute(db);
  // The runs poll `count(*) … WHERE message_id LIKE 'prefix%'` every 20 ms until their messages are applied: without
  // this index each poll scanned every earlier round's rows too, a growing load on Postgres that weighed on the
  // later rounds (a 5-round run fell from 1,913 to 1,267 msg/s on one side).
  await sql
    .raw(`CREATE INDEX effects_message_id ON "${schema}".effects (message_id text_pattern_ops)`)
    .execute(db);
  console.log(`nats bench: ${messages} messages per round, ${rounds} round(s), concurrency ${concurrency}`);
  const rates: Record<Side, number[]> = { plain: [], inbox: [], statements: [] };
  const cpu: Record<Side, number[]> = { plain: [], inbox: [], statements: [] };
  const roundRatios: number[] = [];
  const statementRatios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    // Alternating, so that a slow moment of the machine lands on every side.
    const order = (
      round % 2 === 0 ? ['plain', 'inbox', 'statements'] : ['statements', 'inbox', 'plain']
    ) as Side[];
    for (const side of only === undefined ? order : [only]) {
      const { rate, cpuUs } = await throughput(side, round);
      rates[side].push(rate);
      cpu[side].push(cpuUs);
      console.log(
        `round ${round + 1} ${side}: ${rate.toFixed(0)} msg/s, Node CPU ${cpuUs.toFixed(0)} µs per message`,
      );
    }
    if (only === undefined) {
      roundRatios.push(rates.inbox[round]! / rates.plain[round]!);
      statementRatios.push(rates.statements[round]! / rates.plain[round]!);
    }
  }
  if (only !== undefined) return;
  const latencies = {
    plain: await latency('plain'),
    inbox: await latency('inbox'),
    statements: await latency('statements'),
  };
  const label: Record<Side, string> = {
    plain: 'plain JetStream consumer (consume, insert, ackAck)',
    inbox: 'natsConsumer + Postgres inbox',
    statements: 'natsConsumer + Postgres inbox, statementHandler',
  };
  console.log('');
  console.log(`| consumer (concurrency ${concurrency}) | msg/s | p50 ms | p99 ms |`);
  console.log('| --- | ---: | ---: | ---: |');
  for (const side of ['plain', 'inbox', 'statements'] as Side[])
    console.log(
      `| ${label[side]} | ${median(rates[side]).toFixed(0)} | ${latencies[side].p50} | ${latencies[side].p99} |`,
    );
  console.log('');
  console.log(
    `ratio inbox/plain: ${(median(rates.inbox) / median(rates.plain)).toFixed(2)} (target ≥ 0.85); latency at ${latencyRate} msg/s`,
  );
  console.log(
    `statements/plain: with statementHandler ${(median(rates.statements) / median(rates.plain)).toFixed(2)}`,
  );
  // Not parsed as a ratio line by bench/parse-output.ts (it neither starts with "ratio" nor names "/plain").
  const spread = (xs: readonly number[], digits: number) =>
    `${Math.min(...xs).toFixed(digits)}–${median(xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
  console.log(
    `per round over plain (min–median–max of ${rounds}): inbox ${spread(roundRatios, 2)}, statementHandler ${spread(statementRatios, 2)}`,
  );
  console.log(
    `Node CPU per message (min–median–max): plain ${spread(cpu.plain, 0)} µs, inbox ${spread(cpu.inbox, 0)} µs, statementHandler ${spread(cpu.statements, 0)} µs`,
  );
}

try {
  await main();
} finally {
  for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined);
  await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db);
  await db.destroy();
  await nc.close();
}
