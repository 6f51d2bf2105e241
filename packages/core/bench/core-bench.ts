// Core's throughput on real Postgres against floors measured in the same rounds (concurrency 16, one pool, a
// one-row effect). The scenarios alternate within each round (their order rotating from round to round) and each
// figure is a ratio of two scenarios of the same round; the report gives min–median–max over the rounds:
//
//   bare            BEGIN; INSERT effect; COMMIT on node-postgres, no dedupe (every delivery applies)
//   least row       the hand-written raw-SQL inbox that sends the least row the features need (consumer, id,
//                   fingerprint, expiry) with BEGIN, ON CONFLICT DO NOTHING (a conflict: ROLLBACK, a duplicate)
//   handle()        idempotentConsumer().handle() with an ordinary Kysely handler doing the same insert
//   statements      handle() with a statement handler (statementHandler)
//   batch           handleBatch(50) (and the statement handler's)
//
// Streams of `--deliveries` per scenario: 30% duplicates IN FLIGHT WITH THEIR ORIGINALS (each duplicate
// dispatched right after its original, so both run at once, in batches often in the same batch), and the
// spaced-out variant (a duplicate repeats an id 64–2,000 deliveries earlier, its original long committed);
// first deliveries only; duplicates only (ids completed before the round). Last, every id twice at the same
// moment, to count double effects of a naive select-then-insert consumer beside the inbox's.
//
// Beside them, in the same rounds: the raw inbox with its effect written through Kysely (what a Kysely user would
// write by hand, the floor of a Kysely handler), handle() through the pg seam (@inboxkit/data/pg) against the raw
// pg inbox, and first-only / duplicates-only runs of both, for the CPU budget: Node CPU µs per message
// (process.cpuUsage over each timed phase) for every scenario, and after the rounds a CPU profile of one extra
// run of handle() through the pg seam and of the raw pg inbox, written to <--profile-dir>/core-bench-handle-pg-seam
// .cpuprofile and core-bench-raw-pg-inbox.cpuprofile, each summed by where the code lives, per delivery.
// The same pair for postgres.js and Drizzle (on node-postgres): handle() through @inboxkit/data/postgres-js and
// @inboxkit/data/drizzle against the raw inbox written with that library's own transaction (`sql.begin()`,
// `db.transaction()`), the claim row and the effect sent as the same statements the seam's handler sends; the
// postgres.js pair is profiled too (core-bench-handle-postgres-js-seam, core-bench-raw-postgres-js-inbox). Under
// --only, the profiled pairs whose scenarios ran (`--only postgres.js --profile-dir <dir>`: the postgres.js pair).
//
//   node --import tsx packages/core/bench/core-bench.ts [--quick] [--deliveries 20000] [--rounds 5] [--profile-dir bench-results]
//     [--only postgres.js,Drizzle]   (only the scenarios whose name contains one of the texts, and their figures)
//   (the built packages, as users run them; --conditions=@inboxkit/source before --import: the TypeScript sources)
// Postgres: DATABASE_URL, else .services/env (`npm run services:up`).

import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { CompiledQuery, Kysely, PostgresDialect, sql, type Generated, type Transaction } from 'kysely';
import { sql as drizzleSql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import postgres from 'postgres';
// By package name, as users import them: the built dist/ by default, the TypeScript sources under
// --conditions=@inboxkit/source (bench/run-child.ts; `npm run bench -- --source`).
import { fingerprintPayload, idempotentConsumer, statementHandler } from '@inboxkit/core';
import type { InboundMessage, Outcome } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { drizzleSeam } from '@inboxkit/data/drizzle';
import { pgSeam } from '@inboxkit/data/pg';
import { postgresJsSeam } from '@inboxkit/data/postgres-js';
import { databaseUrl } from './database-url.js';

const CONCURRENCY = 16;
const BATCH_SIZE = 50;

interface BenchDB {
  effects: { id: Generated<string>; message_id: string; amount: number };
}

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    deliveries: { type: 'string' },
    rounds: { type: 'string' },
    url: { type: 'string' },
    // Where the CPU profiles of one extra run of handle() through the pg seam, the postgres.js seam and their raw
    // inboxes go ('' for none).
    'profile-dir': { type: 'string', default: 'bench-results' },
    // Only the scenarios whose name contains one of these comma-separated texts (an A/B of one path), and only
    // the figures made of them; no concurrent-duplicates count.
    only: { type: 'string' },
  },
});
const deliveries = Number(args.deliveries ?? (args.quick ? 3_000 : 20_000));
const rounds = Number(args.rounds ?? 5);
const slice = Math.max(200, Math.floor(deliveries / rounds));
const schema = `bench_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl(args.url), max: CONCURRENCY });
const db = new Kysely<BenchDB>({ dialect: new PostgresDialect({ pool }) });
const INSERT_EFFECT = `INSERT INTO "${schema}".effects (message_id, amount) VALUES ($1, $2)`;
// postgres.js' pool, and Drizzle over the node-postgres pool (the scenarios run one at a time).
const psql = postgres(databaseUrl(args.url), { max: CONCURRENCY, onnotice: () => undefined });
const drizzleDb = drizzle({ client: pool });
/** The raw inbox's claim row, parameterised: consumer, id, fingerprint. */
const CLAIM_ROW = `INSERT INTO "${schema}".least (consumer, message_id, fingerprint, expires_at) VALUES ('bench', $1, $2, now() + interval '7 days') ON CONFLICT DO NOTHING RETURNING 1`;

/** `n` deliveries, 30% of them duplicates dispatched right after their original. */
function inFlight(prefix: string, n: number): string[] {
  const ids: string[] = [];
  for (let fresh = 0; ids.length < n; fresh++) {
    ids.push(`${prefix}-${fresh}`);
    if (ids.length < n && Math.random() < 0.3 / 0.7) ids.push(`${prefix}-${fresh}`);
  }
  return ids;
}

/** `n` deliveries, 30% of them duplicates of an id seen 64–2,000 deliveries earlier (committed long ago). */
function spacedOut(prefix: string, n: number): string[] {
  const ids: string[] = [];
  let fresh = 0;
  for (let i = 0; i < n; i++) {
    if (i > 64 && Math.random() < 0.3) ids.push(ids[i - 64 - Math.floor(Math.random() * Math.min(1_936, i - 64))]!);
    else ids.push(`${prefix}-${fresh++}`);
  }
  return ids;
}

function fresh(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
}

const payload = (id: string) => ({ id, amount: 42 });
function message(id: string): InboundMessage {
  return { id, body: JSON.stringify(payload(id)), headers: {}, source: { transport: 'bench' } };
}

/** Runs `work` over `items` with CONCURRENCY workers; returns items per second. */
async function drive<T>(items: readonly T[], work: (item: T) => Promise<void>, per = 1): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
  return (items.length * per) / ((performance.now() - t0) / 1000);
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

const literal = (v: string): string => `'${v.replaceAll("'", "''")}'`;

/** The hand-written least-row inbox: the row BEGIN carries, the effect, COMMIT; a conflict is a duplicate. */
async function leastRow(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const client = await pool.connect();
    try {
      const fp = fingerprintPayload(payload(id));
      const results = (await client.query(
        `BEGIN; INSERT INTO "${schema}".least (consumer, message_id, fingerprint, expires_at) VALUES ('bench', ${literal(id)}, '${fp}', now() + interval '7 days') ON CONFLICT DO NOTHING RETURNING 1`,
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

/**
 * The same hand-written inbox with its effect written through Kysely: the claim and the effect as a Kysely user
 * writes them by hand in `db.transaction()` (BEGIN, claim, effect, COMMIT; a duplicate commits nothing).
 */
async function leastRowKysely(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const fp = fingerprintPayload(payload(id));
    await db.transaction().execute(async (trx) => {
      const claimed = await sql`INSERT INTO ${sql.table(`${schema}.least`)} (consumer, message_id, fingerprint, expires_at) VALUES ('bench', ${id}, ${fp}, now() + interval '7 days') ON CONFLICT DO NOTHING RETURNING 1`.execute(trx);
      if (claimed.rows.length === 0) return;
      await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${id}, ${42})`.execute(trx);
    });
  });
}

/**
 * The raw inbox a postgres.js user writes: `sql.begin()`, the claim row, the effect if the row was new. The claim
 * row prepared, as a tagged template is and as the seam sends its claim; the effect as the seam's handler sends it.
 */
async function leastRowPostgresJs(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const fp = fingerprintPayload(payload(id));
    await psql.begin(async (tx) => {
      const claimed = await tx.unsafe(CLAIM_ROW, [id, fp], { prepare: true });
      if (claimed.length === 0) return;
      await tx.unsafe(INSERT_EFFECT, [id, 42]);
    });
  });
}

/** The raw inbox a Drizzle user writes: `db.transaction()`, the claim row, the effect if the row was new. */
async function leastRowDrizzle(ids: readonly string[]): Promise<number> {
  return drive(ids, async (id) => {
    const fp = fingerprintPayload(payload(id));
    await drizzleDb.transaction(async (tx) => {
      const claimed = await tx.execute(
        drizzleSql`INSERT INTO ${drizzleSql.raw(`"${schema}".least`)} (consumer, message_id, fingerprint, expires_at) VALUES ('bench', ${id}, ${fp}, now() + interval '7 days') ON CONFLICT DO NOTHING RETURNING 1`,
      );
      if (claimed.rowCount === 0) return;
      await tx.execute(drizzleSql`INSERT INTO ${drizzleSql.raw(`"${schema}".effects`)} (message_id, amount) VALUES (${id}, ${42})`);
    });
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

const store = new PostgresInboxStore<BenchDB>({ db, schema });
const outcomes = new Map<string, number>();
const consumer = idempotentConsumer<{ id: string; amount: number }, Transaction<BenchDB>>({
  name: 'bench',
  store,
  // An ordinary Kysely handler doing the same one-row INSERT as the bare transaction.
  handler: async (m, { tx }) => {
    await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${m.id}, ${m.payload.amount})`.execute(tx);
  },
  hooks: {
    onOutcome: ({ outcome }) => {
      const key = outcome.status === 'retry' ? `retry:${outcome.reason}` : outcome.status;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    },
  },
});
// The same effect through a statement handler, its query given compiled (as the transports' benches do).
const statementConsumer = (name: string, through: PostgresInboxStore<BenchDB>) =>
  idempotentConsumer<{ id: string; amount: number }, Transaction<BenchDB>>({
    name,
    store: through,
    handler: statementHandler((m) => CompiledQuery.raw(INSERT_EFFECT, [m.id, m.payload.amount])),
  });
const statements = statementConsumer('bench-statements', store);
// The A/B of each fast path (docs/core.md, "What each mechanism buys"): the same consumers with it off.
const plainConsumer = idempotentConsumer<{ id: string; amount: number }, Transaction<BenchDB>>({
  name: 'bench-plain',
  store: new PostgresInboxStore<BenchDB>({ db, schema, pipelining: 'off' }),
  handler: async (m, { tx }) => {
    await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${m.id}, ${m.payload.amount})`.execute(tx);
  },
});
const plainStatements = statementConsumer('bench-statements-plain', new PostgresInboxStore<BenchDB>({ db, schema, temporaryFunctions: false }));

// handle() through the pg seam (@inboxkit/data/pg): the effect is the parameterised pg query the raw inbox
// sends, on the PoolClient the store holds. Same consumer name and table as `consumer`: the seeded ids are
// duplicates for both.
const seamConsumer = idempotentConsumer<{ id: string; amount: number }, pg.PoolClient>({
  name: 'bench',
  store: new PostgresInboxStore<unknown, pg.PoolClient>({ seam: pgSeam(pool), schema }),
  handler: async (m, { tx }) => {
    await tx.query(INSERT_EFFECT, [m.id, m.payload.amount]);
  },
});

// handle() through the postgres.js seam and the Drizzle seam, the effect the statement each raw inbox sends.
const postgresJsConsumer = idempotentConsumer<{ id: string; amount: number }, postgres.TransactionSql>({
  name: 'bench',
  store: new PostgresInboxStore<unknown, postgres.TransactionSql>({ seam: postgresJsSeam(psql), schema }),
  handler: async (m, { tx }) => {
    await tx.unsafe(INSERT_EFFECT, [m.id, m.payload.amount]);
  },
});
const drizzleConsumer = idempotentConsumer({
  name: 'bench',
  store: new PostgresInboxStore({ seam: drizzleSeam(drizzleDb), schema }),
  handler: async (m: { id: string; payload: { id: string; amount: number } }, { tx }) => {
    await tx.execute(drizzleSql`INSERT INTO ${drizzleSql.raw(`"${schema}".effects`)} (message_id, amount) VALUES (${m.id}, ${m.payload.amount})`);
  },
});

interface Handles {
  handle(message: InboundMessage): Promise<Outcome>;
  handleBatch(messages: readonly InboundMessage[]): Promise<Outcome[]>;
}

function handling(through: Handles = consumer) {
  return (ids: readonly string[]) =>
    drive(ids, async (id) => {
      const o = await through.handle(message(id));
      if (o.status !== 'processed' && o.status !== 'duplicate') throw new Error(`${id}: ${JSON.stringify(o)}`);
    });
}

function batching(through: Handles = consumer) {
  return (ids: readonly string[]) => {
    const batches: string[][] = [];
    for (let i = 0; i < ids.length; i += BATCH_SIZE) batches.push(ids.slice(i, i + BATCH_SIZE));
    return drive(
      batches,
      async (batch) => {
        const results: Outcome[] = await through.handleBatch(batch.map(message));
        for (const o of results) if (o.status !== 'processed' && o.status !== 'duplicate') throw new Error(JSON.stringify(o));
      },
      BATCH_SIZE,
    );
  };
}

interface Scenario {
  readonly name: string;
  readonly ids: (tag: string) => string[];
  readonly run: (ids: readonly string[]) => Promise<number>;
}

const ALL_SCENARIOS: Scenario[] = [
  { name: 'bare pg transaction (no dedupe)', ids: (t) => inFlight(`${t}-bare`, slice), run: bare },
  { name: 'least-row raw inbox, 30% duplicates in flight', ids: (t) => inFlight(`${t}-least`, slice), run: leastRow },
  { name: 'least-row raw inbox, 30% duplicates spaced out', ids: (t) => spacedOut(`${t}-leasts`, slice), run: leastRow },
  { name: 'least-row raw inbox, first deliveries only', ids: (t) => fresh(`${t}-lfirst`, slice), run: leastRow },
  { name: 'least-row raw inbox, duplicates only', ids: (t) => fresh(`${t}-lseed`, slice), run: leastRow },
  { name: 'least-row raw inbox, Kysely effect, 30% duplicates in flight', ids: (t) => inFlight(`${t}-leastk`, slice), run: leastRowKysely },
  { name: 'handle() pg seam, 30% duplicates in flight', ids: (t) => inFlight(`${t}-pg`, slice), run: handling(seamConsumer) },
  { name: 'handle() pg seam, first deliveries only', ids: (t) => fresh(`${t}-pgfirst`, slice), run: handling(seamConsumer) },
  { name: 'handle() pg seam, duplicates only', ids: (t) => fresh(`${t}-seed`, slice), run: handling(seamConsumer) },
  { name: 'least-row raw inbox, postgres.js, 30% duplicates in flight', ids: (t) => inFlight(`${t}-pjraw`, slice), run: leastRowPostgresJs },
  { name: 'handle() postgres.js seam, 30% duplicates in flight', ids: (t) => inFlight(`${t}-pj`, slice), run: handling(postgresJsConsumer) },
  { name: 'least-row raw inbox, Drizzle, 30% duplicates in flight', ids: (t) => inFlight(`${t}-dzraw`, slice), run: leastRowDrizzle },
  { name: 'handle() Drizzle seam, 30% duplicates in flight', ids: (t) => inFlight(`${t}-dz`, slice), run: handling(drizzleConsumer) },
  { name: 'handle(), 30% duplicates in flight', ids: (t) => inFlight(`${t}-ik`, slice), run: handling() },
  { name: 'handle(), 30% duplicates spaced out', ids: (t) => spacedOut(`${t}-iks`, slice), run: handling() },
  { name: 'handle(), first deliveries only', ids: (t) => fresh(`${t}-first`, slice), run: handling() },
  { name: 'handle(), duplicates only', ids: (t) => fresh(`${t}-seed`, slice), run: handling() },
  { name: `handleBatch(${BATCH_SIZE}), 30% duplicates in flight`, ids: (t) => inFlight(`${t}-batch`, slice), run: batching() },
  { name: 'statementHandler, 30% duplicates in flight', ids: (t) => inFlight(`${t}-st`, slice), run: handling(statements) },
  {
    name: `statementHandler handleBatch(${BATCH_SIZE}), 30% duplicates in flight`,
    ids: (t) => inFlight(`${t}-stb`, slice),
    run: batching(statements),
  },
  { name: 'handle(), in flight, pipelining off', ids: (t) => inFlight(`${t}-plain`, slice), run: handling(plainConsumer) },
  { name: 'statementHandler, in flight, one-round-trip path off', ids: (t) => inFlight(`${t}-stp`, slice), run: handling(plainStatements) },
  {
    name: `statementHandler handleBatch(${BATCH_SIZE}), in flight, one-round-trip path off`,
    ids: (t) => inFlight(`${t}-stbp`, slice),
    run: batching(plainStatements),
  },
];

const SCENARIOS = args.only === undefined ? ALL_SCENARIOS : ALL_SCENARIOS.filter((s) => args.only!.split(',').some((text) => s.name.includes(text)));

/** The figures reported, each a ratio of two scenarios of one round, with the issue's target. */
const RATIOS: { name: string; of: string; to: string; target?: number }[] = [
  { name: 'handle() pg seam / least-row raw pg inbox, in flight', of: 'handle() pg seam, 30% duplicates in flight', to: 'least-row raw inbox, 30% duplicates in flight', target: 0.9 },
  {
    name: 'handle() postgres.js seam / least-row raw postgres.js inbox, in flight',
    of: 'handle() postgres.js seam, 30% duplicates in flight',
    to: 'least-row raw inbox, postgres.js, 30% duplicates in flight',
    target: 0.9,
  },
  {
    name: 'handle() Drizzle seam / least-row raw Drizzle inbox, in flight',
    of: 'handle() Drizzle seam, 30% duplicates in flight',
    to: 'least-row raw inbox, Drizzle, 30% duplicates in flight',
    target: 0.9,
  },
  { name: 'duplicate / first delivery, pg seam', of: 'handle() pg seam, duplicates only', to: 'handle() pg seam, first deliveries only', target: 3 },
  { name: 'duplicate / first delivery, raw pg inbox', of: 'least-row raw inbox, duplicates only', to: 'least-row raw inbox, first deliveries only' },
  {
    name: 'handle() Kysely / least-row raw inbox with a Kysely effect, in flight',
    of: 'handle(), 30% duplicates in flight',
    to: 'least-row raw inbox, Kysely effect, 30% duplicates in flight',
    target: 0.9,
  },
  { name: 'handle() / least-row raw inbox, in flight', of: 'handle(), 30% duplicates in flight', to: 'least-row raw inbox, 30% duplicates in flight', target: 0.9 },
  { name: 'handle() / least-row raw inbox, spaced out', of: 'handle(), 30% duplicates spaced out', to: 'least-row raw inbox, 30% duplicates spaced out', target: 0.9 },
  { name: 'handle() / bare transaction, in flight', of: 'handle(), 30% duplicates in flight', to: 'bare pg transaction (no dedupe)', target: 0.75 },
  { name: 'handle() / bare transaction, spaced out', of: 'handle(), 30% duplicates spaced out', to: 'bare pg transaction (no dedupe)', target: 0.75 },
  { name: 'duplicate / first delivery', of: 'handle(), duplicates only', to: 'handle(), first deliveries only', target: 3 },
  { name: 'handleBatch(50) / handle(), in flight', of: `handleBatch(${BATCH_SIZE}), 30% duplicates in flight`, to: 'handle(), 30% duplicates in flight', target: 3 },
  { name: 'handleBatch(50) / bare transaction', of: `handleBatch(${BATCH_SIZE}), 30% duplicates in flight`, to: 'bare pg transaction (no dedupe)', target: 2 },
  { name: 'statementHandler / bare transaction', of: 'statementHandler, 30% duplicates in flight', to: 'bare pg transaction (no dedupe)' },
  {
    name: 'statementHandler handleBatch(50) / bare transaction',
    of: `statementHandler handleBatch(${BATCH_SIZE}), 30% duplicates in flight`,
    to: 'bare pg transaction (no dedupe)',
  },
  { name: 'A/B pipelining (BEGIN with the claim, COMMIT tag): handle() auto / off', of: 'handle(), 30% duplicates in flight', to: 'handle(), in flight, pipelining off' },
  {
    name: 'A/B one-round-trip statement path: statementHandler on / off',
    of: 'statementHandler, 30% duplicates in flight',
    to: 'statementHandler, in flight, one-round-trip path off',
  },
  {
    name: 'A/B one-round-trip statement path: statementHandler handleBatch(50) on / off',
    of: `statementHandler handleBatch(${BATCH_SIZE}), 30% duplicates in flight`,
    to: `statementHandler handleBatch(${BATCH_SIZE}), in flight, one-round-trip path off`,
  },
];

async function effectsOf(pattern: string): Promise<{ total: number; distinct: number }> {
  const r = await sql<{ total: number; distinct: number }>`
    SELECT count(*)::int AS total, count(DISTINCT message_id)::int AS distinct
    FROM ${sql.table(`${schema}.effects`)} WHERE message_id LIKE ${pattern}`.execute(db);
  return r.rows[0]!;
}

/** The CPU profiles taken after the rounds: label, file name, the run, and the scenario it repeats. */
const PROFILED: readonly (readonly [string, string, (ids: readonly string[]) => Promise<number>, string])[] = [
  ['handle() pg seam', 'handle-pg-seam', handling(seamConsumer), 'handle() pg seam, 30% duplicates in flight'],
  ['the raw pg inbox', 'raw-pg-inbox', leastRow, 'least-row raw inbox, 30% duplicates in flight'],
  ['handle() postgres.js seam', 'handle-postgres-js-seam', handling(postgresJsConsumer), 'handle() postgres.js seam, 30% duplicates in flight'],
  ['the raw postgres.js inbox', 'raw-postgres-js-inbox', leastRowPostgresJs, 'least-row raw inbox, postgres.js, 30% duplicates in flight'],
];

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const spread = (xs: readonly number[], digits = 2): string =>
  `${Math.min(...xs).toFixed(digits)}–${median(xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;

/**
 * A CPU profile (V8's sampling profiler, as `node --cpu-prof` writes it) of one extra run of `run` (handle()
 * through a seam, that library's raw inbox: `PROFILED`) with 30% duplicates in flight, after the timed rounds (its sampling
 * would weigh on their figures), written to `<dir>/core-bench-<name>.cpuprofile` (open it in Chrome DevTools or
 * speedscope), and its self time summed by where the code lives, as a share and per delivery.
 */
async function profileOneRun(dir: string, label: string, name: string, run: (ids: readonly string[]) => Promise<number>): Promise<void> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  await run(inFlight(`prof-${name}`, slice));
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  mkdirSync(dir, { recursive: true });
  const file = `${dir}/core-bench-${name}.cpuprofile`;
  writeFileSync(file, JSON.stringify(profile));
  // Samples, not the wall time between them: on a loaded machine one sample can stand for a thread descheduled
  // for 150 ms, which would then be blamed on whatever function it stopped in.
  const selfUs = new Map<number, number>();
  for (const id of profile.samples!) selfUs.set(id, (selfUs.get(id) ?? 0) + 1);
  const groups = new Map<string, number>();
  const functions = new Map<string, number>();
  // The profiler's own stop (the inspector's post) is not the bench's work: left out with all it called.
  const own = new Set<number>();
  const children = new Map(profile.nodes.map((n) => [n.id, n.children ?? []]));
  const leaveOut = (id: number): void => {
    own.add(id);
    for (const c of children.get(id) ?? []) leaveOut(c);
  };
  for (const node of profile.nodes) if (node.callFrame.functionName === 'post' && node.callFrame.url === 'node:inspector') leaveOut(node.id);
  let total = 0;
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0;
    const { url, functionName, lineNumber } = node.callFrame;
    if (functionName === '(idle)' || us === 0 || own.has(node.id)) continue;
    total += us;
    const where = whereCodeLives(url, functionName);
    groups.set(where, (groups.get(where) ?? 0) + us);
    if (where.startsWith('inboxkit')) {
      const key = `${functionName || '(anonymous)'} ${url.replace(/^.*\/packages\//, '')}:${lineNumber + 1}`;
      functions.set(key, (functions.get(key) ?? 0) + us);
    }
  }
  const per = (us: number): string => `${((us / total) * 100).toFixed(1)}%`;
  // One sample every 100 µs: samples × 100 / deliveries is the sampled (not idle) time per delivery.
  const perDelivery = (n: number): string => `${((n * 100) / slice).toFixed(0)} µs`;
  console.log(`\nCPU profile of one run of ${label} (${slice} deliveries, 30% duplicates in flight): ${file}`);
  console.log(`sampled time per delivery, not idle: ${perDelivery(total)}`);
  console.log(
    `by where the code lives (share; per delivery): ${[...groups]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 14)
      .map(([g, n]) => `${g} ${per(n)}; ${perDelivery(n)}`)
      .join(', ')}`,
  );
  console.log(
    `inboxkit's heaviest functions (self time): ${[...functions].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([f, us]) => `${f} ${per(us)}`).join('; ')}`,
  );
}

/** The module group a profiled function belongs to. */
function whereCodeLives(url: string, functionName: string): string {
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(program)') return 'V8 and native (program)';
  // The bench's own code (message building, the raw inboxes) lives under packages/core/bench: not inboxkit's.
  if (url.includes('/bench/')) return 'the bench itself';
  if (url.includes('/packages/core/')) return 'inboxkit core';
  if (url.includes('/packages/data/')) return 'inboxkit data';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'Node internals';
  // Wall time in the socket write calls, the kernel's loopback TCP (it wakes the backend) included.
  if (url === '' && (functionName === 'writeBuffer' || functionName === 'writev')) return 'socket writes (native)';
  return url === '' ? `native (${functionName || 'anonymous'})` : 'other';
}

async function main(): Promise<void> {
  await migrateInbox(db, { schema });
  await pool.query(`CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`);
  await pool.query(`CREATE TABLE "${schema}".naive_processed (message_id text NOT NULL)`);
  await pool.query(`CREATE INDEX ON "${schema}".naive_processed (message_id)`);
  await pool.query(
    `CREATE TABLE "${schema}".least (consumer text COLLATE "C" NOT NULL, message_id text COLLATE "C" NOT NULL, fingerprint text, expires_at timestamptz NOT NULL, PRIMARY KEY (consumer, message_id))`,
  );
  const version = (await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  console.log(
    `core bench: ${slice} deliveries per scenario and round, ${rounds} rounds (${slice * rounds} per scenario), concurrency ${CONCURRENCY}, Postgres ${version}`,
  );
  // Warm up every path (JIT, connections, plans, the statement handler's function and prepared statement).
  for (const s of SCENARIOS) await s.run(s.ids('warm').slice(0, 400));

  const rates = new Map<string, number[]>();
  // Node CPU (user + system, process.cpuUsage over the timed phase) per delivery, in µs, per scenario and round.
  const cpu = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    const tag = `r${round}`;
    // The duplicates-only scenarios repeat ids completed before the round.
    await handling()(fresh(`${tag}-seed`, slice));
    await leastRow(fresh(`${tag}-lseed`, slice));
    for (let k = 0; k < SCENARIOS.length; k++) {
      const s = SCENARIOS[(k + round) % SCENARIOS.length]!;
      const ids = s.ids(tag);
      const cpuBefore = process.cpuUsage();
      const rate = await s.run(ids);
      const used = process.cpuUsage(cpuBefore);
      rates.set(s.name, [...(rates.get(s.name) ?? []), rate]);
      cpu.set(s.name, [...(cpu.get(s.name) ?? []), (used.user + used.system) / ids.length]);
    }
    process.stderr.write(`round ${round + 1}/${rounds} done\n`);
  }

  console.log('');
  console.log('| scenario | deliveries/s (min–median–max over the rounds) | × bare (median) | Node CPU µs per delivery (min–median–max) |');
  console.log('|---|---:|---:|---:|');
  const bareRates = rates.get('bare pg transaction (no dedupe)');
  for (const s of SCENARIOS) {
    const r = rates.get(s.name)!;
    const bare = bareRates === undefined ? '' : median(r.map((v, i) => v / bareRates[i]!)).toFixed(2);
    console.log(`| ${s.name} | ${spread(r, 0)} | ${bare} | ${spread(cpu.get(s.name)!, 0)} |`);
  }
  // The CPU budget: inboxkit's Node CPU per message beside the raw inbox's, ratios taken round by round.
  console.log('');
  console.log('| Node CPU per message | µs (min–median–max) | × the same library\'s raw inbox (min–median–max) |');
  console.log('|---|---:|---:|');
  const cpuBudget: Record<string, { us: number[]; vsRaw?: number[] }> = {};
  for (const [label, name, raw] of [
    ['raw pg inbox, first delivery', 'least-row raw inbox, first deliveries only', undefined],
    ['raw pg inbox, duplicate', 'least-row raw inbox, duplicates only', undefined],
    ['handle() pg seam, first delivery', 'handle() pg seam, first deliveries only', 'least-row raw inbox, first deliveries only'],
    ['handle() pg seam, duplicate', 'handle() pg seam, duplicates only', 'least-row raw inbox, duplicates only'],
    ['handle() Kysely, first delivery', 'handle(), first deliveries only', 'least-row raw inbox, first deliveries only'],
    ['handle() Kysely, duplicate', 'handle(), duplicates only', 'least-row raw inbox, duplicates only'],
    [`handleBatch(${BATCH_SIZE}) Kysely, per message (30% duplicates in flight)`, `handleBatch(${BATCH_SIZE}), 30% duplicates in flight`, undefined],
    ['bare pg transaction, per transaction', 'bare pg transaction (no dedupe)', undefined],
    ['raw postgres.js inbox, per message in flight', 'least-row raw inbox, postgres.js, 30% duplicates in flight', undefined],
    ['handle() postgres.js seam, per message in flight', 'handle() postgres.js seam, 30% duplicates in flight', 'least-row raw inbox, postgres.js, 30% duplicates in flight'],
    ['raw Drizzle inbox, per message in flight', 'least-row raw inbox, Drizzle, 30% duplicates in flight', undefined],
    ['handle() Drizzle seam, per message in flight', 'handle() Drizzle seam, 30% duplicates in flight', 'least-row raw inbox, Drizzle, 30% duplicates in flight'],
  ] as const) {
    const us = cpu.get(name);
    if (us === undefined || (raw !== undefined && !cpu.has(raw))) continue;
    const vsRaw = raw === undefined ? undefined : us.map((v, i) => v / cpu.get(raw)![i]!);
    cpuBudget[label] = { us, ...(vsRaw === undefined ? {} : { vsRaw }) };
    console.log(`| ${label} | ${spread(us, 0)} | ${vsRaw === undefined ? '' : `${spread(vsRaw)}×`} |`);
  }
  const ratios: Record<string, { rounds: number[]; target?: number }> = {};
  console.log('');
  for (const r of RATIOS) {
    const of = rates.get(r.of);
    const to = rates.get(r.to);
    if (of === undefined || to === undefined) continue;
    const each = of.map((v, i) => v / to[i]!);
    ratios[r.name] = { rounds: each, ...(r.target === undefined ? {} : { target: r.target }) };
    const verdict = r.target === undefined ? '' : ` (target ≥ ${r.target}×: ${median(each) >= r.target ? 'met' : 'missed'})`;
    console.log(`${r.name}: ${spread(each)}× (min–median–max of ${rounds} rounds)${verdict}`);
  }
  for (const [label, pattern] of [
    ['handle()', '%-ik-%'],
    ['handleBatch', '%-batch-%'],
    ['statementHandler', '%-st-%'],
    ['statementHandler batch', '%-stb-%'],
  ] as const) {
    const e = await effectsOf(pattern);
    console.log(`double effects, ${label} with duplicates in flight: ${e.total - e.distinct}`);
  }

  // The profiled pairs whose scenarios ran (all of them, or those --only kept), after every count of effects.
  const profiles = async (): Promise<void> => {
    if (!args['profile-dir']) return;
    for (const [label, name, run, scenario] of PROFILED) {
      if (SCENARIOS.some((s) => s.name === scenario)) await profileOneRun(args['profile-dir'], label, name, run);
    }
  };
  if (args.only !== undefined) {
    await profiles();
    process.stdout.write(`BENCH_RESULT ${JSON.stringify({ deliveries: slice * rounds, rounds, concurrency: CONCURRENCY, only: args.only, rates: Object.fromEntries(rates), cpu: Object.fromEntries(cpu), cpuBudget, ratios })}\n`);
    return;
  }
  // Every id twice at the same moment.
  const pairs = Array.from({ length: Math.min(deliveries, 4_000) / 2 }, (_, i) => `conc-n-${i}`).flatMap((id) => [id, id]);
  await naive(pairs);
  const nc = await effectsOf('conc-n-%');
  outcomes.clear();
  await handling()(pairs.map((id) => id.replace('conc-n', 'conc-ik')));
  const ic = await effectsOf('conc-ik-%');
  console.log(
    `concurrent duplicates (${pairs.length / 2} ids, 2 copies at once): naive applied ${nc.total - nc.distinct} twice (${(((nc.total - nc.distinct) / (pairs.length / 2)) * 100).toFixed(0)}%), inboxkit ${ic.total - ic.distinct} (${[...outcomes].map(([k, v]) => `${k} ${v}`).join(', ')})`,
  );
  for (const [label, pattern] of [
    ['pg seam', '%-pg-%'],
    ['postgres.js seam', '%-pj-%'],
    ['Drizzle seam', '%-dz-%'],
  ] as const) {
    const e = await effectsOf(pattern);
    console.log(`double effects, handle() ${label} with duplicates in flight: ${e.total - e.distinct}`);
  }
  await profiles();
  process.stdout.write(
    `BENCH_RESULT ${JSON.stringify({ deliveries: slice * rounds, rounds, concurrency: CONCURRENCY, rates: Object.fromEntries(rates), cpu: Object.fromEntries(cpu), cpuBudget, ratios, doubles: ic.total - ic.distinct, naiveDoubles: nc.total - nc.distinct, pairs: pairs.length / 2 })}\n`,
  );
}

try {
  await main();
} finally {
  await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).execute(db).catch(() => undefined);
  await psql.end();
  await db.destroy();
}
