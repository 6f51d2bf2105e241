// Core's throughput on real Postgres, side by side in one run (concurrency 16, a one-row effect):
//   bare        BEGIN; INSERT effect; COMMIT on node-postgres, no dedupe (the floor to beat)
//   raw floor   BEGIN + a minimal claim in one round trip, effect, COMMIT (the SQL floor of this design)
//   inboxkit    idempotentConsumer().handle(), transactional mode, 30% duplicates
//   first-only  the same with no duplicates            dup-only   deliveries of ids already completed
//   batch       handleBatch() of 50 messages           naive      SELECT, then BEGIN; INSERT effect; INSERT id; COMMIT
// plus concurrent duplicates (each id twice at once) to count the double effects the naive consumer lets through.
//
// Run: npx tsx packages/core/bench/core-bench.ts [--quick] [--deliveries N] [--rounds R]
// Postgres: DATABASE_URL, else .services/env (`npm run services:up`).

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { CompiledQuery, Kysely, PostgresDialect, sql, type Generated, type Transaction } from 'kysely';
import pg from 'pg';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import type { Outcome } from '../src/outcome.js';
import { migrateInbox, PostgresInboxStore } from '../src/postgres/index.js';
import { databaseUrl } from './database-url.js';
import { statementHandler } from '../src/statement-handler.js';

const CONCURRENCY = 16;
const BATCH_SIZE = 50;

interface BenchDB {
  effects: { id: Generated<string>; message_id: string; amount: number };
}

interface Result {
  readonly name: string;
  readonly deliveries: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly note: string;
}

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    deliveries: { type: 'string' },
    rounds: { type: 'string' },
    url: { type: 'string' },
  },
});

const deliveries = Number(args.deliveries ?? (args.quick ? 4_000 : 20_000));
const rounds = Number(args.rounds ?? (args.quick ? 4 : 10));
const url = databaseUrl(args.url);
const schema = `bench_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY });
const db = new Kysely<BenchDB>({ dialect: new PostgresDialect({ pool }) });

/**
 * A delivery stream of `n` messages with `dupShare` duplicates. A duplicate repeats an id seen 64–2,000
 * deliveries earlier (a redelivery after a rebalance or a producer retry: its first copy has committed).
 */
function stream(prefix: string, n: number, dupShare: number): string[] {
  const ids: string[] = [];
  let fresh = 0;
  for (let i = 0; i < n; i++) {
    if (i > 64 && Math.random() < dupShare) ids.push(ids[i - 64 - Math.floor(Math.random() * Math.min(1_936, i - 64))]!);
    else ids.push(`${prefix}-${fresh++}`);
  }
  return ids;
}

function message(id: string): InboundMessage {
  return { id, body: JSON.stringify({ id, amount: 42 }), headers: {}, source: { transport: 'bench' } };
}

/** Runs `work` over `items` with CONCURRENCY workers; returns seconds. */
async function drive<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function bare(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(INSERT_EFFECT, [id, 42]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });
}

/**
 * The raw-SQL floor of this design: the claim (a minimal inbox row inserted as completed, a conflict meaning
 * duplicate) shares BEGIN's round trip, then the effect, then COMMIT. No features: no attempts, leases, payload
 * check or dead letters — what inboxkit adds must cost little on top of this.
 */
async function rawFloor(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const client = await pool.connect();
    try {
      const literal = `'${id.replaceAll("'", "''")}'`;
      const results = (await client.query(
        `BEGIN; INSERT INTO "${schema}".floor_inbox (message_id) VALUES (${literal}) ON CONFLICT DO NOTHING RETURNING 1`,
      )) as unknown as pg.QueryResult[];
      if (results[1]!.rowCount === 0) {
        await client.query('ROLLBACK');
        return;
      }
      await client.query(INSERT_EFFECT, [id, 42]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });
}

/** Check-then-act: a read outside the transaction decides, so concurrent duplicates both apply. */
async function naive(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const client = await pool.connect();
    try {
      const seen = await client.query(`SELECT 1 FROM "${schema}".naive_processed WHERE message_id = $1`, [id]);
      if (seen.rowCount !== 0) return;
      await client.query('BEGIN');
      await client.query(INSERT_EFFECT, [id, 42]);
      await client.query(`INSERT INTO "${schema}".naive_processed (message_id) VALUES ($1)`, [id]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });
}

const INSERT_EFFECT = `INSERT INTO "${schema}".effects (message_id, amount) VALUES ($1, $2)`;
const store = new PostgresInboxStore<BenchDB>({ db, schema });
const outcomes = new Map<string, number>();
const consumer = idempotentConsumer<{ id: string; amount: number }, Transaction<BenchDB>>({
  name: 'bench',
  store,
  // The same one-row INSERT as the bare consumer, precompiled: the bench measures inboxkit, not query building.
  handler: async (m, { tx }) => {
    await tx.executeQuery(CompiledQuery.raw(INSERT_EFFECT, [m.id, m.payload.amount]));
  },
  hooks: {
    onOutcome: ({ outcome }) => {
      const key = outcome.status === 'retry' ? `retry:${outcome.reason}` : outcome.status;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    },
  },
});

// The same effect through a statement handler: claim and statement in one round trip (a batch: with its COMMIT).
const statements = idempotentConsumer<{ id: string; amount: number }, Transaction<BenchDB>>({
  name: 'bench-statements',
  store,
  handler: statementHandler((m) => CompiledQuery.raw(INSERT_EFFECT, [m.id, m.payload.amount])),
});

async function inboxkit(ids: readonly string[], through = consumer): Promise<number> {
  return drive(ids, async (id) => {
    await through.handle(message(id));
  });
}

async function inboxkitBatch(ids: readonly string[], through = consumer): Promise<number> {
  const batches: string[][] = [];
  for (let i = 0; i < ids.length; i += BATCH_SIZE) batches.push(ids.slice(i, i + BATCH_SIZE));
  return drive(batches, async (batch) => {
    const results: Outcome[] = await through.handleBatch(batch.map(message));
    if (results.length !== batch.length) throw new Error('batch lost outcomes');
  });
}

/** Effects of the ids matching `pattern` (a LIKE pattern without the trailing `-%`). */
async function effectsOf(pattern: string): Promise<{ total: number; distinct: number }> {
  const r = await sql<{ total: number; distinct: number }>`
    SELECT count(*)::int AS total, count(DISTINCT message_id)::int AS distinct
    FROM ${sql.table(`${schema}.effects`)} WHERE message_id LIKE ${`${pattern}-%`}`.execute(db);
  return r.rows[0]!;
}

async function main(): Promise<void> {
  await migrateInbox(db, { schema });
  await sql.raw(`CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`).execute(db);
  await sql.raw(`CREATE TABLE "${schema}".naive_processed (message_id text NOT NULL)`).execute(db);
  await sql
    .raw(`CREATE TABLE "${schema}".floor_inbox (message_id text COLLATE "C" PRIMARY KEY, completed_at timestamptz NOT NULL DEFAULT now())`)
    .execute(db);
  await sql.raw(`CREATE INDEX ON "${schema}".naive_processed (message_id)`).execute(db);
  const version = (await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  console.log(
    `core bench: ${deliveries} deliveries per scenario in ${rounds} interleaved slices, concurrency ${CONCURRENCY}, Postgres ${version}`,
  );

  // Warm up every path (JIT, connections, plans) on a small stream.
  await bare(stream('warm-bare', 500, 0));
  await inboxkit(stream('warm-ik', 500, 0.3));
  await inboxkitBatch(stream('warm-b', 500, 0.3));
  await naive(stream('warm-n', 500, 0.3));
  await rawFloor(stream('warm-f', 500, 0.3));

  // Scenarios run in interleaved slices (rotating their order each round) so that load drifting on a shared
  // machine touches every scenario alike; rates are total deliveries over total time.
  const slice = Math.max(200, Math.floor(deliveries / rounds));
  const totals = new Map<string, { deliveries: number; seconds: number; note: () => Promise<string> }>();
  const dupOnlyIds = stream('dup-seed', slice, 0);
  await inboxkit(dupOnlyIds);
  const scenarios: { name: string; run: (tag: string) => Promise<number>; note?: () => Promise<string> }[] = [
    { name: 'bare pg transaction (no dedupe)', run: (tag) => bare(stream(`${tag}-bare`, slice, 0.3)) },
    { name: 'raw-SQL inbox floor, 30% duplicates', run: (tag) => rawFloor(stream(`${tag}-floor`, slice, 0.3)) },
    {
      name: 'inboxkit handle(), 30% duplicates',
      run: (tag) => inboxkit(stream(`${tag}-ik`, slice, 0.3)),
      note: async () => {
        const e = await effectsOf('%-ik');
        return `double effects ${e.total - e.distinct}`;
      },
    },
    { name: 'inboxkit handle(), first deliveries only', run: (tag) => inboxkit(stream(`${tag}-first`, slice, 0)) },
    { name: 'inboxkit handle(), duplicates only', run: () => inboxkit(dupOnlyIds) },
    {
      name: `inboxkit handleBatch(${BATCH_SIZE}), 30% duplicates`,
      run: (tag) => inboxkitBatch(stream(`${tag}-batch`, slice, 0.3)),
      note: async () => {
        const e = await effectsOf('%-batch');
        return `double effects ${e.total - e.distinct}`;
      },
    },
    {
      name: 'inboxkit statementHandler, 30% duplicates',
      run: (tag) => inboxkit(stream(`${tag}-st`, slice, 0.3), statements),
      note: async () => {
        const e = await effectsOf('%-st');
        return `double effects ${e.total - e.distinct}`;
      },
    },
    {
      name: `inboxkit statementHandler handleBatch(${BATCH_SIZE}), 30% duplicates`,
      run: (tag) => inboxkitBatch(stream(`${tag}-stbatch`, slice, 0.3), statements),
      note: async () => {
        const e = await effectsOf('%-stbatch');
        return `double effects ${e.total - e.distinct}`;
      },
    },
    {
      name: 'naive select-then-insert, 30% duplicates',
      run: (tag) => naive(stream(`${tag}-naive`, slice, 0.3)),
      note: async () => {
        const e = await effectsOf('%-naive');
        return `double effects ${e.total - e.distinct} (duplicates here are not concurrent)`;
      },
    },
  ];
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < scenarios.length; k++) {
      const scenario = scenarios[(k + round) % scenarios.length]!;
      const seconds = await scenario.run(`r${round}`);
      const t = totals.get(scenario.name) ?? { deliveries: 0, seconds: 0, note: scenario.note ?? (async () => '') };
      totals.set(scenario.name, { ...t, deliveries: t.deliveries + slice, seconds: t.seconds + seconds });
    }
  }
  const best = new Map<string, Result>();
  for (const scenario of scenarios) {
    const t = totals.get(scenario.name)!;
    best.set(scenario.name, { name: scenario.name, deliveries: t.deliveries, seconds: t.seconds, perSecond: t.deliveries / t.seconds, note: await t.note() });
  }

  // Concurrent duplicates: every id delivered twice at the same moment.
  const pairs = Array.from({ length: Math.min(deliveries, 4_000) / 2 }, (_, i) => `conc-n-${i}`).flatMap((id) => [id, id]);
  await naive(pairs);
  const nc = await effectsOf('conc-n');
  const ikPairs = pairs.map((id) => id.replace('conc-n', 'conc-ik'));
  outcomes.clear();
  await inboxkit(ikPairs);
  const ic = await effectsOf('conc-ik');

  const bareRate = best.get('bare pg transaction (no dedupe)')!.perSecond;
  console.log('');
  console.log('| run | deliveries/s | × bare | notes |');
  console.log('|---|---:|---:|---|');
  for (const r of best.values()) {
    console.log(`| ${r.name} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${(r.perSecond / bareRate).toFixed(2)} | ${r.note} |`);
  }
  const dupOnly = best.get('inboxkit handle(), duplicates only')!.perSecond;
  const firstOnly = best.get('inboxkit handle(), first deliveries only')!.perSecond;
  const batch = best.get(`inboxkit handleBatch(${BATCH_SIZE}), 30% duplicates`)!.perSecond;
  const single = best.get('inboxkit handle(), 30% duplicates')!.perSecond;
  const floor = best.get('raw-SQL inbox floor, 30% duplicates')!.perSecond;
  console.log(`inboxkit handle() vs the raw-SQL floor: ${(single / floor).toFixed(2)}×`);
  console.log('');
  console.log(`duplicate vs first delivery: ${(dupOnly / firstOnly).toFixed(2)}×`);
  console.log(`handleBatch vs handle: ${(batch / single).toFixed(2)}×`);
  console.log(
    `concurrent duplicates (${pairs.length / 2} ids, 2 copies at once): naive applied ${nc.total - nc.distinct} twice (${(((nc.total - nc.distinct) / (pairs.length / 2)) * 100).toFixed(0)}%), inboxkit ${ic.total - ic.distinct} (${[...outcomes].map(([k, v]) => `${k} ${v}`).join(', ')})`,
  );
}


try {
  await main();
} finally {
  await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db).catch(() => undefined);
  await db.destroy();
}
