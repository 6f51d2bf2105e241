// Node CPU per message of handle() through the pg seam beside the hand-written raw pg inbox (BEGIN + the claim
// row in one round trip, the effect, COMMIT; a conflict is a duplicate and rolls back), first deliveries and
// duplicates, at concurrency 16 on one pool: the A/B figure of each change to inboxkit's own per-delivery work
// (docs/benchmarks.md, "CPU per message"). CPU µs per message (process.cpuUsage over the timed phase, user +
// system) holds up on a loaded machine where throughput ratios do not. The phases alternate over --rounds;
// each figure is the median of the rounds, the spread beside it.
//
//   node --import tsx packages/core/bench/handle-cpu.ts [--deliveries 3000] [--rounds 3]
//   (built packages; add --conditions=@inboxkit/source before --import for the TypeScript sources)
//
// A/B of a change: build A and B and run this script alternately on each (or under farm-bench --vs); compare
// the `handle() pg seam, first` and `duplicate` medians and their ratio to the raw inbox's.

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { fingerprintPayload, idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { pgSeam } from '@inboxkit/data/pg';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { databaseUrl } from './database-url.js';

const { values } = parseArgs({
  options: { deliveries: { type: 'string', default: '3000' }, rounds: { type: 'string', default: '3' }, url: { type: 'string' } },
});
const N = Number(values.deliveries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;
const schema = `bench_hcpu_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl(values.url), max: CONCURRENCY });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const INSERT_EFFECT = `INSERT INTO "${schema}".effects (message_id, amount) VALUES ($1, $2)`;

const consumer = idempotentConsumer<{ id: string; amount: number }, pg.PoolClient>({
  name: 'cpu',
  store: new PostgresInboxStore<unknown, pg.PoolClient>({ seam: pgSeam(pool), schema }),
  handler: async (m, { tx }) => {
    await tx.query(INSERT_EFFECT, [m.id, m.payload.amount]);
  },
});

const payload = (id: string) => ({ id, amount: 42 });
const message = (id: string): InboundMessage => ({ id, body: JSON.stringify(payload(id)), headers: {}, source: { transport: 'bench' } });
const literal = (v: string): string => `'${v.replaceAll("'", "''")}'`;

async function rawInbox(id: string): Promise<void> {
  const client = await pool.connect();
  try {
    const results = (await client.query(
      `BEGIN; INSERT INTO "${schema}".raw (consumer, message_id, fingerprint, expires_at) VALUES ('cpu', ${literal(id)}, '${fingerprintPayload(payload(id))}', now() + interval '7 days') ON CONFLICT DO NOTHING RETURNING 1`,
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
}

async function handle(id: string): Promise<void> {
  const o = await consumer.handle(message(id));
  if (o.status !== 'processed' && o.status !== 'duplicate') throw new Error(`${id}: ${JSON.stringify(o)}`);
}

/** Node CPU µs per item of `work` over `ids`, CONCURRENCY at a time. */
async function cpuPer(ids: readonly string[], work: (id: string) => Promise<void>): Promise<number> {
  let next = 0;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await work(ids[next++]!);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / ids.length;
}

const fresh = (prefix: string): string[] => Array.from({ length: N }, (_, i) => `${prefix}-${i}`);
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

try {
  await migrateInbox(db, { schema });
  await pool.query(`CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`);
  await pool.query(
    `CREATE TABLE "${schema}".raw (consumer text COLLATE "C" NOT NULL, message_id text COLLATE "C" NOT NULL, fingerprint text, expires_at timestamptz NOT NULL, PRIMARY KEY (consumer, message_id))`,
  );
  for (const id of fresh('warm').slice(0, 600)) await Promise.all([handle(id), rawInbox(id)]);
  const phases = [
    ['handle() pg seam, first', (r: number) => cpuPer(fresh(`r${r}-h`), handle)],
    ['handle() pg seam, duplicate', (r: number) => cpuPer(fresh(`r${r}-h`), handle)],
    ['raw pg inbox, first', (r: number) => cpuPer(fresh(`r${r}-w`), rawInbox)],
    ['raw pg inbox, duplicate', (r: number) => cpuPer(fresh(`r${r}-w`), rawInbox)],
  ] as const;
  const figures = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    // Firsts before their duplicates; the two subjects alternate which goes first.
    const order = round % 2 === 0 ? [0, 1, 2, 3] : [2, 3, 0, 1];
    for (const k of order) {
      const [name, run] = phases[k]!;
      figures.set(name, [...(figures.get(name) ?? []), await run(round)]);
    }
  }
  const fmt = (xs: readonly number[], digits = 0): string =>
    `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;
  for (const [name, xs] of figures) console.log(`${name}: ${fmt(xs)} µs`);
  const ratio = (a: string, b: string): string => fmt(figures.get(a)!.map((v, i) => v / figures.get(b)![i]!), 2);
  console.log(`pg seam / raw, first: ${ratio('handle() pg seam, first', 'raw pg inbox, first')}×`);
  console.log(`pg seam / raw, duplicate: ${ratio('handle() pg seam, duplicate', 'raw pg inbox, duplicate')}×`);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await db.destroy();
}
