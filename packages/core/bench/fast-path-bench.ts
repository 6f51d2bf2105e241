// The fast path, measured: idempotentConsumer().handle() on the real Postgres inbox with and without
// redisFastPath() on the real Redis, side by side in alternating rounds.
//
//   storm: a duplicate storm — 90% of the deliveries are duplicates of completed ids, 10% new — concurrency 16.
//   first: first deliveries only (every id new): what the fast path's lookup (a miss) costs a delivery it
//          cannot help.
//
// Each round runs both variants of both workloads, the variant order alternating between rounds; the figure is
// the median of the rounds' ratios (with fast path / without), with their min–max.
//
//   node --conditions=@inboxkit/source --import tsx packages/core/bench/fast-path-bench.ts [--deliveries 6000] [--rounds 5]

import { existsSync, readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { createClient } from 'redis';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { migrateInbox, PostgresInboxStore } from '../src/postgres/index.js';
import { redisFastPath } from '../src/redis/index.js';
import { databaseUrl } from './database-url.js';

const { values } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '6000' },
    rounds: { type: 'string', default: '5' },
  },
});
const N = Number(values.deliveries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;
const DUPLICATE_SHARE = 0.9;

function redisUrl(): string {
  if (process.env['REDIS_URL']) return process.env['REDIS_URL'];
  const envFile = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  const line = existsSync(envFile)
    ? readFileSync(envFile, 'utf8')
        .split('\n')
        .find((l) => l.startsWith('REDIS_URL='))
    : undefined;
  if (line) return line.slice('REDIS_URL='.length).trim();
  throw new Error('no Redis: start it with `bash scripts/services/services.sh up redis` or set REDIS_URL');
}

interface DB {
  fp_effects: { message_id: string };
}

const schema = `bench_fast_path_${randomUUID().slice(0, 8)}`;
const pool = new pg.Pool({ connectionString: databaseUrl(), max: CONCURRENCY + 4 });
const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
const redis = createClient({ url: redisUrl(), disableOfflineQueue: true });
redis.on('error', () => undefined);
await redis.connect();
await migrateInbox(db, { schema });
await sql.raw(`CREATE TABLE "${schema}".fp_effects (message_id text NOT NULL)`).execute(db);
const store = new PostgresInboxStore({ db, schema });

const delivery = (id: string): InboundMessage => ({
  id,
  body: JSON.stringify({ id, amount: 100 }),
  headers: {},
  source: { transport: 'bench' },
});

function consumer(name: string, withFastPath: boolean) {
  return idempotentConsumer<unknown, Transaction<DB>>({
    name,
    store,
    ...(withFastPath ? { fastPath: redisFastPath({ client: redis }) } : {}),
    handler: async (m, { tx }) => {
      await tx.withSchema(schema).insertInto('fp_effects').values({ message_id: m.id }).execute();
    },
  });
}

/** Runs `ids` through `handle` 16 at a time; deliveries per second. */
async function run(handle: (m: InboundMessage) => Promise<unknown>, ids: readonly string[]): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await handle(delivery(ids[next++]!));
    }),
  );
  return ids.length / ((performance.now() - started) / 1000);
}

/** A storm: N deliveries, 90% duplicates of `completed`, 10% new ids, shuffled. */
function storm(completed: readonly string[], prefix: string): string[] {
  const ids: string[] = [];
  for (let i = 0; i < N; i++) {
    ids.push(
      Math.random() < DUPLICATE_SHARE
        ? completed[Math.floor(Math.random() * completed.length)]!
        : `${prefix}-new-${i}`,
    );
  }
  return ids;
}

type Variant = 'storm, no fast path' | 'storm, fast path' | 'first, no fast path' | 'first, fast path';
const rates: Record<Variant, number[]> = {
  'storm, no fast path': [],
  'storm, fast path': [],
  'first, no fast path': [],
  'first, fast path': [],
};
const stormRatios: number[] = [];
const firstRatios: number[] = [];

async function measure(round: number, withFastPath: boolean): Promise<void> {
  const label = withFastPath ? 'fast path' : 'no fast path';
  const name = `bench-${round}-${withFastPath ? 'fp' : 'plain'}`;
  const c = consumer(name, withFastPath);
  // First deliveries: every id new.
  const first = Array.from({ length: Math.round(N / 2) }, (_, i) => `${name}-first-${i}`);
  rates[`first, ${label}`].push(await run((m) => c.handle(m), first));
  // The storm's duplicates are of those completed ids (and, with the fast path, already in Redis).
  await new Promise((resolve) => setTimeout(resolve, 200));
  rates[`storm, ${label}`].push(await run((m) => c.handle(m), storm(first, name)));
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  // Warm-up: connections, prepared claims, JIT.
  await run(
    (m) => consumer('bench-warm', true).handle(m),
    Array.from({ length: 500 }, (_, i) => `warm-${i % 250}`),
  );
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [false, true] : [true, false];
    for (const withFastPath of order) await measure(round, withFastPath);
    stormRatios.push(rates['storm, fast path'][round]! / rates['storm, no fast path'][round]!);
    firstRatios.push(rates['first, fast path'][round]! / rates['first, no fast path'][round]!);
    process.stdout.write(
      `round ${round + 1}: storm ${stormRatios[round]!.toFixed(2)}× (${Math.round(rates['storm, fast path'][round]!)} vs ${Math.round(rates['storm, no fast path'][round]!)} deliveries/s), ` +
        `first ${firstRatios[round]!.toFixed(2)}× (${Math.round(rates['first, fast path'][round]!)} vs ${Math.round(rates['first, no fast path'][round]!)})\n`,
    );
  }
  const duplicatesApplied = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM (SELECT message_id FROM ${sql.table(`${schema}.fp_effects`)} GROUP BY message_id HAVING count(*) > 1) AS twice`.execute(
    db,
  );
  process.stdout.write(
    `\n| variant | deliveries/s (median of ${ROUNDS} rounds) | min | max |\n|---|---:|---:|---:|\n` +
      (Object.keys(rates) as Variant[])
        .map(
          (v) =>
            `| ${v} | ${Math.round(median(rates[v]))} | ${Math.round(Math.min(...rates[v]))} | ${Math.round(Math.max(...rates[v]))} |`,
        )
        .join('\n') +
      '\n\n' +
      `storm (90% duplicates, c=16) fast path / no fast path: ${median(stormRatios).toFixed(2)}× (min ${Math.min(...stormRatios).toFixed(2)}, max ${Math.max(...stormRatios).toFixed(2)}; target ≥ 3×)\n` +
      `first deliveries fast path / no fast path: ${median(firstRatios).toFixed(2)}× (min ${Math.min(...firstRatios).toFixed(2)}, max ${Math.max(...firstRatios).toFixed(2)}; target ≥ 0.95×)\n` +
      `effects applied twice: ${duplicatesApplied.rows[0]!.n}\n`,
  );
  process.stdout.write(
    `BENCH_RESULT ${JSON.stringify({
      deliveries: N,
      rounds: ROUNDS,
      concurrency: CONCURRENCY,
      duplicateShare: DUPLICATE_SHARE,
      rates,
      storm: {
        median: median(stormRatios),
        min: Math.min(...stormRatios),
        max: Math.max(...stormRatios),
        ratios: stormRatios,
      },
      first: {
        median: median(firstRatios),
        min: Math.min(...firstRatios),
        max: Math.max(...firstRatios),
        ratios: firstRatios,
      },
      appliedTwice: duplicatesApplied.rows[0]!.n,
    })}\n`,
  );
} finally {
  await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  await db.destroy();
  await redis.quit();
}
