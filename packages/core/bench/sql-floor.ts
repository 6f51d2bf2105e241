// The floor of a first delivery, step by step: what each part of inboxkit's transactional path costs, measured
// as throughput against the bare transaction in the same run. Every step adds one thing to the one before:
//
//   bare pg          BEGIN; INSERT effect; COMMIT on node-postgres, no dedupe (the reference, 1.00)
//   narrow claim     + a two-column claim row (consumer, id) sent with BEGIN: the design brief's raw-SQL floor
//   minimal row      + the columns the issue's own features need at the least: the payload fingerprint (mismatch
//                      detection) and the expiry (dedupe window, pruning)
//   v1 row           version 1's inbox row instead (22 columns, a btree on expires_at for completed rows and a
//                    partial index), a literal INSERT … ON CONFLICT DO NOTHING: what the lean row replaced
//   inbox row        the inbox table's own row instead (+ status, attempts, changed_at; its BRIN index), a literal
//                    INSERT … ON CONFLICT DO NOTHING: what Postgres must write, no statement around it
//   claim statement  the store's own claim (the call of its claim function that handle() sends with BEGIN,
//                    answering the attempt), sent by hand on node-postgres: all of the SQL, none of the JS
//   + Kysely effect  the same, the effect sent as the handler below sends it (a Kysely `sql` template on a
//                    Kysely instance over that one connection): what the handler's Kysely costs, still no
//                    inboxkit JavaScript
//   handle()         idempotentConsumer().handle() with an ordinary handler doing the same insert through
//                    its `tx` (transactional mode, new ids)
//
// Concurrency 16 on one pool, new ids only, the variants alternate within each round (the order reversed every
// other round) and each round's rate is divided by that round's bare rate; the median of those ratios is the
// figure. On a shared 2-vCPU machine single rounds swing by a third, and the median of ten still moves by up to
// a tenth from run to run: compare steps within one run.
//
//   node --conditions=@inboxkit/source --import tsx packages/core/bench/sql-floor.ts [--deliveries 2000] [--rounds 10]
//     [--only 'handle(),claim statement']
// Postgres: DATABASE_URL, else .services/env (`npm run services:up`).

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

// The library by package name (built by default, sources under --conditions=@inboxkit/source); InboxSql, which
// only writes the claim's SQL text for the hand-built steps, is internal and comes from the sources.
import { fingerprintPayload, idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { literalStatement, migrateInbox, PostgresInboxStore, resolveInboxTableNames } from '@inboxkit/core/postgres';
import { InboxSql } from '../src/postgres/inbox-sql.js';
import { databaseUrl } from './database-url.js';

const { values } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '10' },
    // Run only these steps (comma-separated names), e.g. to profile one: --only 'handle()' (bare pg always runs).
    only: { type: 'string' },
  },
});
const N = Number(values.deliveries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;

const schema = `bench_floor_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl(), max: CONCURRENCY });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const effects = `"${schema}".effects`;
const effectsTable = sql.table(`${schema}.effects`);
const DEDUPE_WINDOW_MS = 7 * 24 * 3_600_000;

const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
  name: 'floor',
  store: new PostgresInboxStore<unknown>({ db, schema }),
  dedupeWindowMs: DEDUPE_WINDOW_MS,
  handler: async (message, { tx }) => {
    await sql`INSERT INTO ${effectsTable} (message_id, amount) VALUES (${message.id}, 42)`.execute(tx);
  },
});

// The store's own single-delivery claim, exactly as handle() sends it for a new id (transactional mode).
const claim = new InboxSql(resolveInboxTableNames({ schema }));
const claimSettings = {
  consumer: 'floor-by-hand',
  maxAttempts: 5,
  dedupeWindowMs: DEDUPE_WINDOW_MS,
  lockTimeoutMs: 5_000,
};
const payload = (id: string): unknown => ({ id, amount: 42 });
const fingerprint = (id: string): string => fingerprintPayload(payload(id));
const claimByHandSql = (id: string): string =>
  `BEGIN;\n${literalStatement(
    claim.claim(claimSettings, { messageId: id, fingerprint: fingerprint(id), messageTimestamp: undefined, deliveryCount: 1, replayId: undefined }),
  )}`;
/** Version 1's inbox table (migrations/0001_inbox.sql) in the bench schema, under the name `inbox_v1`. */
const v1Schema = readFileSync(new URL('../../../migrations/0001_inbox.sql', import.meta.url), 'utf8')
  .replaceAll('"inbox_', '"inbox_v1_')
  .replaceAll('"inboxkit"."inbox"', `"${schema}"."inbox_v1"`)
  .replaceAll('"inboxkit".', `"${schema}".`)
  .replace(/CREATE SCHEMA[^;]*;/, '');

function message(id: string): InboundMessage {
  return { id, body: JSON.stringify(payload(id)), headers: {}, source: { transport: 'bench' } };
}

/** The effect as the bare transaction sends it: one parameterized INSERT on node-postgres. */
const pgEffect = (client: pg.PoolClient, id: string): Promise<unknown> =>
  client.query(`INSERT INTO ${effects} (message_id, amount) VALUES ($1, $2)`, [id, 42]);

/** A Kysely instance on one pooled client (as a handler's `tx` is), made once per client. */
const kyselys = new WeakMap<pg.PoolClient, Kysely<unknown>>();
function kyselyOn(client: pg.PoolClient): Kysely<unknown> {
  let k = kyselys.get(client);
  if (k === undefined) {
    const borrowed = { query: client.query.bind(client), release: () => undefined };
    const single = { connect: async () => borrowed };
    k = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: single as unknown as pg.Pool }) });
    kyselys.set(client, k);
  }
  return k;
}

/** The store's claim by hand, sent with BEGIN; it must answer a new claim (attempt 1). */
async function claimByHand(client: pg.PoolClient, id: string): Promise<void> {
  const r = await client.query(claimByHandSql(id));
  const rows = (Array.isArray(r) ? r[1] : r)?.rows as { answer: string | null }[] | undefined;
  if (rows?.[0]?.answer !== 'c1 new') throw new Error(`claim statement: expected a new claim of ${id}`);
}

/** A delivery on one pooled client: `begin` (BEGIN and whatever rides with it), `effect`, COMMIT. */
const delivery =
  (
    begin: (client: pg.PoolClient, id: string) => Promise<unknown>,
    effect: (client: pg.PoolClient, id: string) => Promise<unknown> = pgEffect,
  ) =>
  async (id: string): Promise<void> => {
    const client = await pool.connect();
    try {
      await begin(client, id);
      await effect(client, id);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };

const VARIANTS: Record<string, (id: string) => Promise<void>> = {
  'bare pg': delivery((c) => c.query('BEGIN')),
  'narrow claim': delivery((c, id) =>
    c.query(
      `BEGIN; INSERT INTO "${schema}".narrow_claims (consumer, message_id) VALUES ('floor', '${id}') ON CONFLICT DO NOTHING`,
    ),
  ),
  'minimal row': delivery((c, id) =>
    c.query(
      `BEGIN; INSERT INTO "${schema}".minimal_claims (consumer, message_id, fingerprint, expires_at) VALUES ('floor', '${id}', '${fingerprint(id)}', now() + interval '7 days') ON CONFLICT DO NOTHING`,
    ),
  ),
  'v1 row': delivery((c, id) =>
    c.query(
      `BEGIN; INSERT INTO "${schema}".inbox_v1 (consumer, message_id, status, fingerprint, attempts, started_attempts, completed_at, expires_at, claimed_from) ` +
        `VALUES ('floor-row', '${id}', 'completed', '${fingerprint(id)}', 1, 1, now(), now() + interval '7 days', 'new') ON CONFLICT DO NOTHING`,
    ),
  ),
  'inbox row': delivery((c, id) =>
    c.query(
      `BEGIN; INSERT INTO "${schema}".inbox (consumer, message_id, status, fingerprint, attempts, changed_at, expires_at) ` +
        `VALUES ('floor-row', '${id}', 'completed', '${fingerprint(id)}', 1, now(), now() + interval '7 days') ON CONFLICT DO NOTHING`,
    ),
  ),
  'claim statement': delivery(claimByHand),
  '+ Kysely effect': delivery(claimByHand, (c, id) =>
    sql`INSERT INTO ${effectsTable} (message_id, amount) VALUES (${id}, 42)`.execute(kyselyOn(c)),
  ),
  'handle()': async (id) => {
    const o = await consumer.handle(message(id));
    if (o.status !== 'processed') throw new Error(`handle(): expected processed, got ${o.status}`);
  },
};

/** Deliveries per second, and Node's CPU time (user + system) per delivery in µs. */
async function drive(
  ids: readonly string[],
  work: (id: string) => Promise<void>,
): Promise<{ rate: number; cpuUs: number }> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await work(ids[next++]!);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { rate: ids.length / seconds, cpuUs: (cpu.user + cpu.system) / ids.length };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const rates: Record<string, number[]> = {};
const cpuUs: Record<string, number[]> = {};
const setup = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
try {
  await migrateInbox(new Kysely<unknown>({ dialect: new PostgresDialect({ pool: setup }) }), { schema });
  await setup.query(v1Schema);
  await setup.query(
    `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`,
  );
  await setup.query(
    `CREATE TABLE "${schema}".narrow_claims (consumer text COLLATE "C" NOT NULL, message_id text COLLATE "C" NOT NULL, PRIMARY KEY (consumer, message_id))`,
  );
  await setup.query(
    `CREATE TABLE "${schema}".minimal_claims (consumer text COLLATE "C" NOT NULL, message_id text COLLATE "C" NOT NULL, fingerprint text, expires_at timestamptz NOT NULL, PRIMARY KEY (consumer, message_id))`,
  );
  const only = values.only?.split(',');
  const names = Object.keys(VARIANTS).filter(
    (n) => only === undefined || n === 'bare pg' || only.includes(n),
  );
  for (const name of names)
    await drive(
      Array.from({ length: 300 }, (_, i) => `warm-${name}-${i}`),
      VARIANTS[name]!,
    );
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of r % 2 === 0 ? names : [...names].reverse()) {
      const d = await drive(
        Array.from({ length: N }, (_, i) => `r${r}-${name}-${i}`),
        VARIANTS[name]!,
      );
      (rates[name] ??= []).push(d.rate);
      (cpuUs[name] ??= []).push(d.cpuUs);
    }
    process.stderr.write(`round ${r + 1}/${ROUNDS}: bare pg ${rates['bare pg']!.at(-1)!.toFixed(0)}/s\n`);
  }
  // Every step applied its effect once per delivery (warm-up included), or its figures mean nothing.
  const expected = names.length * (300 + N * ROUNDS);
  const { rows } = await setup.query<{ n: string }>(`SELECT count(*) AS n FROM ${effects}`);
  if (Number(rows[0]!.n) !== expected) throw new Error(`expected ${expected} effects, found ${rows[0]!.n}`);
} finally {
  await db.destroy();
  await setup.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await setup.end();
}

const bare = rates['bare pg']!;
const result: Record<
  string,
  { medianRatio: number; medianPerSecond: number; medianCpuUs: number; ratios: number[] }
> = {};
console.log(
  `${N} new ids per variant and round, ${ROUNDS} rounds, concurrency ${CONCURRENCY}; ratio = rate / bare pg's rate in the same round`,
);
for (const name of Object.keys(rates)) {
  const ratios = rates[name]!.map((rate, i) => rate / bare[i]!);
  const cpu = median(cpuUs[name]!);
  result[name] = {
    medianRatio: median(ratios),
    medianPerSecond: median(rates[name]!),
    medianCpuUs: cpu,
    ratios,
  };
  console.log(
    `${name.padEnd(16)} median ${median(ratios).toFixed(2)}× bare pg  (${median(rates[name]!).toFixed(0)}/s, Node CPU ${cpu.toFixed(0)} µs/delivery; rounds ${ratios.map((q) => q.toFixed(2)).join(' ')})`,
  );
}
process.stdout.write(
  `BENCH_RESULT ${JSON.stringify({ deliveries: N, rounds: ROUNDS, concurrency: CONCURRENCY, variants: result })}\n`,
);
