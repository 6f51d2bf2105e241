// What the partitioned inbox's cross-day check costs a claim (PostgresInboxStore `crossDayCheck`): the advisory
// lock on hash(consumer, id) and the look for the id on every day partition, against the check off and against
// the other design considered, a non-partitioned "id index" table written in each claim's transaction.
//
// One partitioned inbox in the bench's own schema, with day partitions for --days days back (a dedupe window of
// that many days) to three ahead, loaded with --rows completed rows spread over the past days (random UUID-shaped
// ids, as traffic builds the key indexes), then VACUUM ANALYZE. Then, in each of --rounds rounds, the variants
// take turns (the order rotates), each for --seconds: --concurrency workers deliver through
// idempotentConsumer().handle() (transactional, a no-op handler), first deliveries of new ids stamped today, and
// then as many redeliveries of ids it completed (duplicates, which pay the check as well).
//   off        crossDayCheck: false (the day from the message alone)
//   on         crossDayCheck: true (the default)
//   id-index   crossDayCheck: false, and the effect inserts (consumer, message_id) into a plain table with that
//              primary key, ON CONFLICT DO NOTHING: the least such a design writes on every first delivery (it
//              would also need its own batched pruning, which is what the partitions are there to avoid).
// Then the same three on the server alone, without the client and the network: a DO block calls the claim
// function (`inbox_claim`) for --server-claims new ids, committing after each as a delivery would (with
// synchronous_commit off in that session: the flush is the same for all and would hide their difference), and
// times the loop with clock_timestamp(); µs per claim, median of the rounds.
// Every variant's handler is a statementHandler (`SELECT 1`, or the id-index insert), so each delivery is one
// round trip with its claim, as the id index would be inside the claim function, and the variants differ only
// by what they ask of Postgres.
//
//   node --conditions=@inboxkit/source --import tsx bench/partition-cross-day.ts [--rows 1100000] [--days 7]
//     [--rounds 3] [--seconds 10] [--concurrency 8] [--server-claims 5000] [--server-only]
// Postgres: DATABASE_URL, else .services/env (`npm run services:up`).

import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import { idempotentConsumer, statementHandler, type InboundMessage } from '@inboxkit/core';
import { maintainInboxPartitions, migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { CompiledQuery, Kysely, PostgresDialect, type Transaction } from 'kysely';
import pg from 'pg';

import { percentile, printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1100000' },
    days: { type: 'string', default: '7' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '8' },
    'server-claims': { type: 'string', default: '5000' },
    'server-only': { type: 'boolean', default: false },
  },
});
const rows = Number(values.rows);
const days = Number(values.days);
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const serverClaims = Number(values['server-claims']);
const DAY_MS = 86_400_000;
const CONSUMER = 'orders';
const schema = `bench_crossday_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: concurrency + 2 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const log = (line: string): void => console.log(line);
const todayStart = Math.floor(Date.now() / DAY_MS) * DAY_MS;

type Variant = 'off' | 'on' | 'id-index';
const VARIANTS: readonly Variant[] = ['off', 'on', 'id-index'];

function consumerOf(variant: Variant) {
  const store = new PostgresInboxStore({ db, schema, layout: 'daily-partitions', crossDayCheck: variant === 'on' });
  return idempotentConsumer<unknown, Transaction<unknown>>({
    name: CONSUMER,
    store,
    dedupeWindowMs: days * DAY_MS,
    handler: statementHandler((m) =>
      variant === 'id-index'
        ? CompiledQuery.raw(`INSERT INTO "${schema}".inbox_ids (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [CONSUMER, m.id])
        : CompiledQuery.raw('SELECT 1'),
    ),
  });
}

const message = (id: string): InboundMessage => ({
  id,
  body: JSON.stringify({ id }),
  headers: {},
  timestamp: new Date(),
  source: { transport: 'bench' },
});

interface Figures {
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
}

const figures = (latencies: number[], elapsedSeconds: number): Figures => {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { perSecond: latencies.length / elapsedSeconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
};

/** --concurrency workers delivering `next()`'s messages for --seconds; each delivery's latency in ms. */
async function drive(handle: (m: InboundMessage) => Promise<unknown>, next: () => InboundMessage | undefined): Promise<Figures> {
  const latencies: number[] = [];
  const began = performance.now();
  const until = began + seconds * 1_000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let m = next(); m !== undefined && performance.now() < until; m = next()) {
        const started = performance.now();
        await handle(m);
        latencies.push(performance.now() - started);
      }
    }),
  );
  return figures(latencies, (performance.now() - began) / 1_000);
}

/** µs per claim of `variant` run by the server alone, each claim committed (see the top of the file). */
async function serverSide(variant: Variant, round: number): Promise<number> {
  const idIndex = variant === 'id-index'
    ? `INSERT INTO "${schema}".inbox_ids (consumer, message_id) VALUES ('${CONSUMER}', v_id) ON CONFLICT DO NOTHING;`
    : '';
  const client = await pool.connect();
  try {
    await client.query(`CREATE TEMPORARY TABLE IF NOT EXISTS crossday_timing (us float8)`);
    await client.query(`TRUNCATE crossday_timing`);
    // The commits' flush to disk is the same for every variant and would hide what they differ by.
    await client.query(`SET synchronous_commit = off`);
    await client.query(`DO $bench$
DECLARE
  v_start timestamptz := clock_timestamp();
  v_id text;
BEGIN
  FOR i IN 1..${serverClaims} LOOP
    v_id := md5('server-${variant}-${round}-' || i || random())::uuid::text;
    PERFORM "${schema}".inbox_claim('${CONSUMER}', v_id, md5(v_id), now(), 0, NULL, 5, ${days * DAY_MS}::float8, '5000', NULL, NULL, NULL, ${variant === 'on'});
    ${idIndex}
    COMMIT;
  END LOOP;
  INSERT INTO crossday_timing VALUES (extract(epoch FROM clock_timestamp() - v_start) * 1e6 / ${serverClaims});
  COMMIT;
END
$bench$`);
    return (await client.query<{ us: number }>('SELECT us FROM crossday_timing')).rows[0]!.us;
  } finally {
    await client.query('RESET synchronous_commit').catch(() => undefined);
    client.release();
  }
}

async function main(): Promise<void> {
  const load = { start: loadavg()[0]! };
  log(`schema ${schema}: ${rows} rows over ${days} past days, ${rounds} rounds of ${seconds} s, ${concurrency} workers; load ${load.start.toFixed(1)}`);
  await migrateInbox(db, { schema, layout: 'daily-partitions' });
  await maintainInboxPartitions({ db }, { schema, dedupeWindowMs: days * DAY_MS });
  await pool.query(`CREATE TABLE "${schema}".inbox_ids (consumer text NOT NULL, message_id text NOT NULL, PRIMARY KEY (consumer, message_id))`);
  const perDay = Math.floor(rows / days);
  for (let d = 1; d <= days; d++) {
    const start = new Date(todayStart - d * DAY_MS);
    await pool.query(
      `INSERT INTO "${schema}".inbox (consumer, message_id, day, status, fingerprint, attempts, changed_at, expires_at)
       SELECT $1, md5('crossday-' || $2::int || '-' || g)::uuid::text, $3::date, 'completed', encode(sha256(int8send(g)), 'hex'), 1,
              $4::timestamptz, $4::timestamptz + make_interval(days => $5::int)
       FROM generate_series(1, $6::int) AS g`,
      [CONSUMER, d, start.toISOString().slice(0, 10), start, days, perDay],
    );
  }
  await pool.query(`VACUUM ANALYZE "${schema}".inbox, "${schema}".inbox_details`);
  const partitions = (
    await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_partition_tree('"${schema}".inbox'::regclass) WHERE isleaf`)
  ).rows[0]!.n;
  log(`loaded; ${partitions} leaf partitions of the hot table`);

  const results: Record<Variant, { first: Figures[]; duplicate: Figures[] }> = {
    off: { first: [], duplicate: [] },
    on: { first: [], duplicate: [] },
    'id-index': { first: [], duplicate: [] },
  };
  for (let round = 0; round < (values['server-only'] ? 0 : rounds); round++) {
    for (let k = 0; k < VARIANTS.length; k++) {
      const variant = VARIANTS[(round + k) % VARIANTS.length]!;
      const consumer = consumerOf(variant);
      const done: string[] = [];
      const f = await drive(
        async (m) => {
          await consumer.handle(m);
          done.push(m.id!);
        },
        () => message(randomUUID()),
      );
      let i = 0;
      const d = await drive((m) => consumer.handle(m), () => (i < done.length ? message(done[i++]!) : undefined));
      results[variant].first.push(f);
      results[variant].duplicate.push(d);
      log(
        `round ${round + 1} ${variant.padEnd(8)} first ${f.perSecond.toFixed(0)}/s p50 ${f.p50.toFixed(2)} p99 ${f.p99.toFixed(2)} ms; duplicate ${d.perSecond.toFixed(0)}/s p50 ${d.p50.toFixed(2)} p99 ${d.p99.toFixed(2)} ms; load ${loadavg()[0]!.toFixed(1)}`,
      );
    }
  }
  const server: Record<Variant, number[]> = { off: [], on: [], 'id-index': [] };
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < VARIANTS.length; k++) {
      const variant = VARIANTS[(round + k) % VARIANTS.length]!;
      server[variant].push(await serverSide(variant, round));
      log(`round ${round + 1} ${variant.padEnd(8)} server side ${server[variant].at(-1)!.toFixed(1)} µs per claim; load ${loadavg()[0]!.toFixed(1)}`);
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = Object.fromEntries(
    VARIANTS.map((v) => [
      v,
      Object.fromEntries(
        (['first', 'duplicate'] as const).map((kind) => [
          kind,
          {
            perSecond: median(results[v][kind].map((x) => x.perSecond)),
            p50: median(results[v][kind].map((x) => x.p50)),
            p99: median(results[v][kind].map((x) => x.p99)),
            rounds: results[v][kind],
          },
        ]),
      ),
    ]),
  );
  const serverSummary = Object.fromEntries(VARIANTS.map((v) => [v, { us: median(server[v]), rounds: server[v] }]));
  const end = loadavg()[0]!;
  log(`load at the end ${end.toFixed(1)}`);
  printResult({ rows, days, rounds, seconds, concurrency, partitions, load: { start: load.start, end }, summary, server: serverSummary });
}

try {
  await main();
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await db.destroy();
}
