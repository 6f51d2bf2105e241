// Claim latency as the inbox grows, side by side: two inbox tables in the bench's own schemas, one pre-filled
// with the small number of completed rows and one with the large number (`INSERT … SELECT generate_series`,
// random 32-hex ids like UUIDs, so lookups land all over the index). idempotentConsumer().handle() is timed one
// delivery at a time (no queueing in the numbers), alternating small and large so that both see the same noise
// of this shared machine:
//   first      a new id: claim + one-row effect + commit (one commit flush)
//   duplicate  an id already completed, picked at random among the pre-filled rows: the claim's one round trip
//
//   node --conditions=@inboxkit/source --import tsx bench/claim-latency.ts [--small 10000] [--large 10000000]
//     [--samples 2000] [--fill-budget 420]
//
// The large table is filled in chunks of 1M rows; when the first million says the whole fill would not fit in
// --fill-budget seconds, it stops there and measures at 1M, and says so.

import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import { idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

import { percentile, printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: {
    small: { type: 'string', default: '10000' },
    large: { type: 'string', default: '10000000' },
    samples: { type: 'string', default: '2000' },
    'fill-budget': { type: 'string', default: '420' },
  },
});
const small = Number(values.small);
const large = Number(values.large);
const samples = Number(values.samples);
const fillBudgetMs = Number(values['fill-budget']) * 1_000;
const CHUNK = 1_000_000;
const CONSUMER = 'bench';

const suffix = randomBytes(4).toString('hex');
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: 4 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });

interface Side {
  readonly schema: string;
  rows: number;
  readonly handle: (message: InboundMessage) => Promise<{ status: string }>;
  readonly first: number[];
  readonly duplicate: number[];
}

function side(schema: string): Side {
  const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
    name: CONSUMER,
    store: new PostgresInboxStore<unknown>({ db, schema }),
    handler: async (message, { tx }) => {
      await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${message.id}, 42)`.execute(
        tx,
      );
    },
  });
  return { schema, rows: 0, handle: (m) => consumer.handle(m), first: [], duplicate: [] };
}

/** The id of pre-filled row `g`: md5 of its number, as the fill computes it. */
function prefilledId(g: number): string {
  return createHash('md5').update(String(g)).digest('hex');
}

function message(id: string): InboundMessage {
  return { id, body: JSON.stringify({ id, amount: 42 }), headers: {}, source: { transport: 'bench' } };
}

async function timed(
  s: Side,
  id: string,
  expect: 'processed' | 'duplicate',
  into: number[] | undefined,
): Promise<void> {
  const t0 = performance.now();
  const outcome = await s.handle(message(id));
  const ms = performance.now() - t0;
  if (outcome.status !== expect)
    throw new Error(`expected ${expect} for ${id}, got ${JSON.stringify(outcome)}`);
  into?.push(ms);
}

async function fill(s: Side, from: number, to: number): Promise<void> {
  await pool.query(
    `INSERT INTO "${s.schema}".inbox (consumer, message_id, status, fingerprint, attempts, changed_at, expires_at)
     SELECT $1, md5(g::text), 'completed',
            -- core's fingerprint of the payload {"amount":42,"id":<id>}: SHA-256 of its canonical JSON, in hex
            encode(sha256(convert_to('{"amount":42,"id":"' || md5(g::text) || '"}', 'UTF8')), 'hex'),
            1, now(), now() + interval '7 days'
     FROM generate_series($2::bigint, $3::bigint) AS g`,
    [CONSUMER, from, to],
  );
  s.rows = to;
}

interface Latency {
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
}

function summary(ms: number[]): Latency {
  const sorted = [...ms].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
  };
}

async function sizeMb(s: Side): Promise<{ tableMb: number; indexMb: number }> {
  const r = await pool.query<{ t: string; i: string }>(
    `SELECT pg_table_size('"${s.schema}".inbox') AS t, pg_indexes_size('"${s.schema}".inbox') AS i`,
  );
  return { tableMb: Number(r.rows[0]!.t) / 2 ** 20, indexMb: Number(r.rows[0]!.i) / 2 ** 20 };
}

const a = side(`bench_claim_small_${suffix}`);
const b = side(`bench_claim_large_${suffix}`);
let note = '';
const result: Record<string, unknown> = { samples };
try {
  for (const s of [a, b]) {
    await migrateInbox(db, { schema: s.schema });
    await pool.query(
      `CREATE TABLE "${s.schema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`,
    );
  }
  await fill(a, 1, small);
  const started = Date.now();
  while (b.rows < large) {
    await fill(b, b.rows + 1, Math.min(large, b.rows + CHUNK));
    const spent = Date.now() - started;
    if (b.rows < large) {
      const projected = (spent / b.rows) * large;
      console.log(
        `  large table: ${b.rows.toLocaleString('en-US')} rows filled in ${(spent / 1000).toFixed(0)} s`,
      );
      if (projected > fillBudgetMs) {
        note =
          `filling ${large.toLocaleString('en-US')} rows would take about ${(projected / 1000).toFixed(0)} s here ` +
          `(budget ${fillBudgetMs / 1000} s): the large table was measured at ${b.rows.toLocaleString('en-US')} rows`;
        console.log(`  ${note}`);
        break;
      }
    }
  }
  const fillSeconds = (Date.now() - started) / 1000;
  for (const s of [a, b]) await pool.query(`VACUUM ANALYZE "${s.schema}".inbox`);
  // Warm-up: plans, prepared statements, connections, the indexes' upper levels.
  for (let i = 0; i < 100; i++) {
    for (const s of [a, b]) {
      await timed(s, randomUUID(), 'processed', undefined);
      await timed(s, prefilledId(1 + Math.floor(Math.random() * s.rows)), 'duplicate', undefined);
    }
  }
  for (let i = 0; i < samples; i++) {
    for (const s of i % 2 === 0 ? [a, b] : [b, a]) {
      await timed(s, randomUUID(), 'processed', s.first);
      await timed(s, prefilledId(1 + Math.floor(Math.random() * s.rows)), 'duplicate', s.duplicate);
    }
  }
  for (const [label, s] of [
    ['small', a],
    ['large', b],
  ] as const) {
    const first = summary(s.first);
    const duplicate = summary(s.duplicate);
    const size = await sizeMb(s);
    result[label] = { rows: s.rows, first, duplicate, ...size };
    console.log(
      `${s.rows.toLocaleString('en-US')} rows (table ${size.tableMb.toFixed(0)} MB, indexes ${size.indexMb.toFixed(0)} MB): ` +
        `first delivery p50 ${first.p50.toFixed(2)} ms p99 ${first.p99.toFixed(2)} ms; ` +
        `duplicate p50 ${duplicate.p50.toFixed(2)} ms p99 ${duplicate.p99.toFixed(2)} ms`,
    );
  }
  result['fillSeconds'] = fillSeconds;
} finally {
  for (const s of [a, b])
    await pool.query(`DROP SCHEMA IF EXISTS "${s.schema}" CASCADE`).catch(() => undefined);
  await db.destroy();
}
printResult({ ...result, note });
