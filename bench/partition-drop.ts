// Expiring a day of the dedupe window: dropping its partition (the partitioned layout) against deleting the same
// number of rows in batches with the store's own prune (the unpartitioned layout), side by side in one run.
//
// Two inboxes in the bench's own schemas, each filled with --rows completed rows spread evenly over --days
// simulated days ending today (`INSERT … SELECT generate_series`, one statement per day, random UUID-shaped ids
// so the key index is built the way traffic builds it), then VACUUM ANALYZE (old days are all-visible in
// production too). Autovacuum is off on the bench's tables so that no background vacuum lands inside a
// measurement; the VACUUM a DELETE needs is run and measured on its own instead.
//
// Each round expires two days in each layout, the layouts taking turns (which goes first alternates):
//   alone       CHECKPOINT (as a day's maintenance finds it: the old pages are cold), then the operation alone:
//               elapsed time and WAL bytes (pg_current_wal_insert_lsn before and after; nothing else writes on
//               the bench's own Postgres), then for the DELETE the VACUUM that reclaims its dead rows, the same.
//   with claims --concurrency first deliveries at a time through idempotentConsumer().handle() on the same
//               store (claim + commit, a no-op handler), a quiet window of --window seconds, then the operation
//               in the middle of the claims: the claims that started from the operation's start to its end (or
//               --window seconds, whichever is longer) against the quiet window just before.
// Sizes (table + indexes, summed over the partitions) after each operation.
//
//   node --conditions=@inboxkit/source --import tsx bench/partition-drop.ts [--rows 10000000] [--days 10]
//     [--rounds 3] [--concurrency 16] [--window 10] [--batch 5000]
// Postgres: DATABASE_URL, else .services/env (`npm run services:up`).

import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { maintainInboxPartitions, migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { percentile, printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000000' },
    days: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
    window: { type: 'string', default: '10' },
    batch: { type: 'string', default: '5000' },
  },
});
const rows = Number(values.rows);
const days = Number(values.days);
const rounds = Number(values.rounds);
const concurrency = Number(values.concurrency);
const windowMs = Number(values.window) * 1_000;
const batchSize = Number(values.batch);
const perDay = rows / days;
if (!Number.isInteger(perDay) || perDay % batchSize !== 0)
  throw new Error(`--rows / --days must be a whole multiple of --batch (${batchSize}), got ${perDay}`);
if (rounds * 2 > days - 2)
  throw new Error(`--rounds ${rounds} expires ${rounds * 2} days: --days must be at least ${rounds * 2 + 2}`);

const CONSUMER = 'orders';
const DAY_MS = 86_400_000;
// The dedupe window of the bench's rows: short enough that the oldest 2 × rounds days are wholly expired.
const WINDOW_DAYS = days - 2 * rounds - 1;
const suffix = randomBytes(4).toString('hex');
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: concurrency + 4 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const log = (line: string): void => console.log(line);
const todayStart = Math.floor(Date.now() / DAY_MS) * DAY_MS;
/** Midnight UTC of simulated day `d` (0 = the oldest, days - 1 = today). */
const dayStart = (d: number): Date => new Date(todayStart - (days - 1 - d) * DAY_MS);

// ── the two layouts ──────────────────────────────────────────────────────────────────────────────────────────

interface Layout {
  readonly name: 'partitioned' | 'unpartitioned';
  readonly schema: string;
  readonly store: PostgresInboxStore;
  create(): Promise<void>;
  /** Rows `from`..`to` (1-based over the whole run) with message timestamps spread over day `d`. */
  loadDay(d: number, from: number, to: number): Promise<void>;
  /** Expires one day's worth of rows, as the layout's maintenance does; what it removed. */
  expireOneDay(): Promise<number>;
  /** The VACUUM the expiry leaves to do, if any. */
  vacuum?(): Promise<void>;
  /** The tables that hold the rows (the partitions, or the one table). */
  tables(): Promise<string[]>;
}

/**
 * Completed rows as a transactional first delivery writes them (the lean hot row; in the partitioned layout with
 * its `day`, the UTC date of the message's timestamp `ts`); the message is taken to arrive when it was stamped.
 */
const fill = (table: string, window: string, withDay: boolean): string =>
  `INSERT INTO ${table} (consumer, message_id, ${withDay ? 'day, ' : ''}status, fingerprint, attempts, changed_at, expires_at)
   SELECT $1, md5('inboxkit-bench-' || g)::uuid::text, ${withDay ? "(ts AT TIME ZONE 'UTC')::date, " : ''}'completed',
          -- a SHA-256 in hex, as core's fingerprint of a payload
          encode(sha256(int8send(g)), 'hex'), 1, ts, ts + ${window}
   FROM generate_series($2::bigint, $3::bigint) AS g,
        LATERAL (SELECT $4::timestamptz + (g - $2::bigint) * $5::float8 * interval '1 millisecond' AS ts) AS t`;

function unpartitioned(): Layout {
  const schema = `bench_flat_${suffix}`;
  const table = `"${schema}".inbox`;
  const store = new PostgresInboxStore({ db, schema });
  return {
    name: 'unpartitioned',
    schema,
    store,
    async create() {
      await migrateInbox(db, { schema });
      await pool.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
    },
    async loadDay(d, from, to) {
      await pool.query(fill(table, `interval '${WINDOW_DAYS} days'`, false), [
        CONSUMER,
        from,
        to,
        dayStart(d),
        DAY_MS / perDay,
      ]);
    },
    async expireOneDay() {
      // The store's own prune, as `inboxkit prune` and startPruner run it: batches of --batch rows.
      const result = await store.prune({ batchSize, maxBatches: perDay / batchSize });
      if (result.deleted !== perDay)
        throw new Error(
          `prune deleted ${result.deleted} rows, expected ${perDay}: ${JSON.stringify(result)}`,
        );
      return result.deleted;
    },
    async vacuum() {
      await pool.query(`VACUUM ${table}`);
    },
    tables: async () => [table],
  };
}

const LAYOUT_SOURCE =
  "core's `daily-partitions` layout, made by `migrateInbox` and used by `PostgresInboxStore` with `layout: 'daily-partitions'`; the drop is a run of `maintainInboxPartitions` whose dedupe window leaves the oldest day out (its plan, then the day's step: advisory lock, `inbox_drop_partition`'s checks, detach and drop)";

// Core's partitioned layout: its migration, its partition maintenance making the older simulated days (a window
// that covers them all), and a day expired by a maintenance run whose window leaves exactly the oldest remaining
// day out of it, as the daily run in production does.
function partitioned(): Layout {
  const schema = `bench_daily_${suffix}`;
  const table = `"${schema}".inbox`;
  const layout = 'daily-partitions';
  const store = new PostgresInboxStore({ db, schema, layout });
  let next = 0;
  const day = (d: number): string => dayStart(d).toISOString().slice(0, 10);
  return {
    name: 'partitioned',
    schema,
    store,
    async create() {
      await migrateInbox(db, { schema, layout });
      await maintainInboxPartitions({ db }, { schema, dedupeWindowMs: (days - 1) * DAY_MS });
      for (const leaf of await this.tables())
        await pool.query(`ALTER TABLE ${leaf} SET (autovacuum_enabled = false)`);
    },
    async loadDay(d, from, to) {
      await pool.query(fill(table, `interval '${WINDOW_DAYS} days'`, true), [
        CONSUMER,
        from,
        to,
        dayStart(d),
        DAY_MS / perDay,
      ]);
    },
    async expireOneDay() {
      // Day `next` is the oldest left; it is wholly out of a window of (days - 2 - next) days (it ends at that
      // many days before today's midnight) and the next day is not. The rows' own expiry (WINDOW_DAYS) has passed.
      const result = await maintainInboxPartitions(
        { db },
        { schema, dedupeWindowMs: (days - 2 - next) * DAY_MS },
      );
      const [step, ...more] = result.steps;
      if (result.status !== 'done' || more.length > 0 || step?.action !== 'dropped' || step.day !== day(next))
        throw new Error(`maintenance was to drop ${day(next)} alone: ${JSON.stringify(result)}`);
      next++;
      return perDay;
    },
    async tables() {
      const r = await pool.query<{ t: string }>(
        `SELECT relid::regclass::text AS t FROM pg_partition_tree($1::regclass) WHERE isleaf`,
        [table],
      );
      return r.rows.map((x) => x.t);
    },
  };
}

// ── measuring ────────────────────────────────────────────────────────────────────────────────────────────────

async function walLsn(): Promise<string> {
  return (await pool.query<{ l: string }>('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0]!.l;
}

async function walSince(lsn: string): Promise<number> {
  const r = await pool.query<{ b: string }>(
    'SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn) AS b',
    [lsn],
  );
  return Number(r.rows[0]!.b);
}

interface Measured {
  readonly ms: number;
  readonly walBytes: number;
}

async function measured(work: () => Promise<unknown>): Promise<Measured> {
  const lsn = await walLsn();
  const t0 = performance.now();
  await work();
  const ms = performance.now() - t0;
  return { ms, walBytes: await walSince(lsn) };
}

interface Size {
  readonly tableBytes: number;
  readonly indexBytes: number;
}

async function sizeOf(layout: Layout): Promise<Size> {
  const tables = await layout.tables();
  const r = await pool.query<{ t: string; i: string }>(
    `SELECT coalesce(sum(pg_table_size(x::regclass)), 0) AS t, coalesce(sum(pg_indexes_size(x::regclass)), 0) AS i
     FROM unnest($1::text[]) AS x`,
    [tables],
  );
  return { tableBytes: Number(r.rows[0]!.t), indexBytes: Number(r.rows[0]!.i) };
}

/** --concurrency workers delivering new ids through handle() until stopped; each claim's start and duration. */
function startClaims(layout: Layout): { stop: () => Promise<Array<[number, number]>> } {
  const consumer = idempotentConsumer<unknown, unknown>({
    name: CONSUMER,
    store: layout.store,
    handler: async () => {},
  });
  const samples: Array<[number, number]> = [];
  let running = true;
  const worker = async (): Promise<void> => {
    while (running) {
      const id = randomUUID();
      const message: InboundMessage = {
        id,
        body: `{"id":"${id}"}`,
        headers: {},
        timestamp: new Date(),
        source: { transport: 'bench' },
      };
      const t0 = performance.now();
      const outcome = await consumer.handle(message);
      samples.push([t0, performance.now() - t0]);
      if (outcome.status !== 'processed') throw new Error(`a new id gave ${JSON.stringify(outcome)}`);
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  return {
    async stop() {
      running = false;
      await Promise.all(workers);
      return samples;
    },
  };
}

interface ClaimStats {
  readonly claims: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

function statsIn(samples: ReadonlyArray<[number, number]>, from: number, to: number): ClaimStats {
  return statsOf(
    samples.filter(([t]) => t >= from && t < to),
    to - from,
  );
}

function statsOf(samples: ReadonlyArray<[number, number]>, spanMs: number): ClaimStats {
  const ms = samples.map(([, d]) => d).sort((a, b) => a - b);
  return {
    claims: ms.length,
    perSecond: ms.length / (spanMs / 1_000),
    p50: percentile(ms, 50),
    p99: percentile(ms, 99),
    max: ms.at(-1) ?? Number.NaN,
  };
}

interface RoundResult {
  readonly alone: Measured;
  readonly vacuum?: Measured;
  readonly withClaims: Measured;
  readonly quiet: ClaimStats;
  readonly during: ClaimStats;
  /** The claims that were running at some moment of the operation (started before its end, ended after its start). */
  readonly overlapping: ClaimStats;
  readonly duringWindowMs: number;
  readonly sizeAfter: Size;
  readonly walPerQuietClaim: number;
}

async function round(layout: Layout): Promise<RoundResult> {
  // Alone.
  await pool.query('CHECKPOINT');
  const alone = await measured(() => layout.expireOneDay());
  const vacuum = layout.vacuum ? await measured(() => layout.vacuum!()) : undefined;
  // With claims: a quiet window, then the operation among the claims.
  const claims = startClaims(layout);
  await sleep(Math.min(1_000, windowMs / 4));
  const quietFrom = performance.now();
  const quietLsn = await walLsn();
  await sleep(windowMs);
  const quietWal = await walSince(quietLsn);
  const quietTo = performance.now();
  const opFrom = performance.now();
  const withClaims = await measured(() => layout.expireOneDay());
  const opEnd = performance.now();
  const opTo = Math.max(opEnd, opFrom + windowMs);
  await sleep(Math.max(0, opTo - performance.now()));
  const samples = await claims.stop();
  if (layout.vacuum) await layout.vacuum();
  const quiet = statsIn(samples, quietFrom, quietTo);
  return {
    alone,
    ...(vacuum ? { vacuum } : {}),
    withClaims,
    quiet,
    during: statsIn(samples, opFrom, opTo),
    overlapping: statsOf(
      samples.filter(([t, d]) => t < opEnd && t + d > opFrom),
      opEnd - opFrom,
    ),
    duringWindowMs: opTo - opFrom,
    sizeAfter: await sizeOf(layout),
    walPerQuietClaim: quietWal / Math.max(1, quiet.claims),
  };
}

// ── the run ──────────────────────────────────────────────────────────────────────────────────────────────────

const mb = (b: number): string => `${(b / 2 ** 20).toFixed(b < 2 ** 20 ? 3 : 0)} MB`;
const layouts = [partitioned(), unpartitioned()];
const result: Record<string, unknown> = {
  rows,
  days,
  perDay,
  rounds,
  concurrency,
  windowSeconds: windowMs / 1_000,
  batchSize,
  layoutSource: LAYOUT_SOURCE,
};
try {
  const [load1] = loadavg();
  log(
    `load average at start ${load1!.toFixed(1)}; ${rows.toLocaleString('en-US')} rows over ${days} days in each layout`,
  );
  const loaded: Record<string, unknown> = {};
  // Both layouts load at once (one backend each): the same work, in half the wall time on two cores.
  await Promise.all(
    layouts.map(async (layout) => {
      const t0 = performance.now();
      await layout.create();
      for (let d = 0; d < days; d++) await layout.loadDay(d, d * perDay + 1, (d + 1) * perDay);
      const loadSeconds = (performance.now() - t0) / 1_000;
      await pool.query(`VACUUM ANALYZE "${layout.schema}".inbox`);
      const size = await sizeOf(layout);
      loaded[layout.name] = {
        loadSeconds,
        ...size,
        tableBytesPerRow: size.tableBytes / rows,
        indexBytesPerRow: size.indexBytes / rows,
      };
      log(
        `${layout.name}: loaded in ${loadSeconds.toFixed(0)} s; table ${mb(size.tableBytes)} (${(size.tableBytes / rows).toFixed(1)} B/row), ` +
          `indexes ${mb(size.indexBytes)} (${(size.indexBytes / rows).toFixed(1)} B/row)`,
      );
    }),
  );
  // Warm-up: connections, prepared plans, the indexes' upper levels; not counted.
  for (const layout of layouts) {
    const warm = startClaims(layout);
    await sleep(Math.min(3_000, windowMs));
    await warm.stop();
  }
  result['loaded'] = loaded;
  const byLayout: Record<string, RoundResult[]> = { partitioned: [], unpartitioned: [] };
  for (let r = 0; r < rounds; r++) {
    for (const layout of r % 2 === 0 ? layouts : [...layouts].reverse()) {
      const x = await round(layout);
      byLayout[layout.name]!.push(x);
      log(
        `round ${r + 1} ${layout.name}: alone ${x.alone.ms.toFixed(1)} ms, WAL ${mb(x.alone.walBytes)}` +
          (x.vacuum ? `; its VACUUM ${x.vacuum.ms.toFixed(0)} ms, WAL ${mb(x.vacuum.walBytes)}` : '') +
          `; with claims ${x.withClaims.ms.toFixed(1)} ms; claims quiet p99 ${x.quiet.p99.toFixed(1)} ms ${x.quiet.perSecond.toFixed(0)}/s, ` +
          `during p99 ${x.during.p99.toFixed(1)} ms (max ${x.during.max.toFixed(1)}) ${x.during.perSecond.toFixed(0)}/s over ${(x.duringWindowMs / 1_000).toFixed(1)} s, ` +
          `the ${x.overlapping.claims} running at some moment of it p99 ${x.overlapping.p99.toFixed(1)} ms; ` +
          `after: table ${mb(x.sizeAfter.tableBytes)}, indexes ${mb(x.sizeAfter.indexBytes)}`,
      );
    }
  }
  result['rounds'] = byLayout;
  const [end1] = loadavg();
  result['loadAverage'] = { start: load1, end: end1 };
} finally {
  for (const layout of layouts)
    await pool.query(`DROP SCHEMA IF EXISTS "${layout.schema}" CASCADE`).catch(() => undefined);
  await db.destroy();
}
printResult(result);
