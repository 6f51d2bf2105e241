// The fast path, measured: idempotentConsumer().handle() on the real Postgres inbox with and without
// redisFastPath() on the real Redis, side by side in alternating rounds.
//
//   storm: a duplicate storm — 90% of the deliveries are duplicates of completed ids, 10% new — concurrency 16.
//   first: first deliveries only (every id new): what the fast path's lookup (a miss) costs a delivery it
//          cannot help.
//   dup:   duplicates only (ids completed earlier in the round): what one costs through the inbox and through
//          Redis. With `first`, it gives the storm's ceiling: with a tenth of the storm still first deliveries,
//          (0.1·first + 0.9·dup without) / (0.1·first + 0.9·dup with), in time per delivery.
//
// In each round the two variants take turns in small blocks (the order flipping every block), so load from
// elsewhere on the machine falls on both; the figure is the median of the rounds' ratios (with fast path /
// without), with their min–max.
//
//   node --conditions=@inboxkit/source --import tsx packages/core/bench/fast-path-bench.ts [--deliveries 6000] [--rounds 5]

import { existsSync, readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { MeterProvider } from '@opentelemetry/api';
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { createClient } from 'redis';
import { idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { redisFastPath } from '@inboxkit/core/redis';
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

const runId = randomUUID().slice(0, 8);
const schema = `bench_fast_path_${runId}`;
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

/** Fast-path lookups by result, over the whole run (from the consumers' `inboxkit.fast_path` counter). */
const lookups = new Map<string, number>();
const countingMeters = {
  getMeter: () => ({
    createCounter: (name: string) => ({
      add: (value: number, attributes?: Record<string, unknown>) => {
        if (name === 'inboxkit.fast_path') {
          const result = String(attributes?.['result']);
          lookups.set(result, (lookups.get(result) ?? 0) + value);
        }
      },
    }),
    createHistogram: () => ({ record: () => undefined }),
  }),
} as unknown as MeterProvider;

function consumer(name: string, withFastPath: boolean) {
  return idempotentConsumer<unknown, Transaction<DB>>({
    name,
    store,
    meterProvider: countingMeters,
    ...(withFastPath ? { fastPath: redisFastPath({ client: redis }) } : {}),
    handler: async (m, { tx }) => {
      await tx.withSchema(schema).insertInto('fp_effects').values({ message_id: m.id }).execute();
    },
  });
}

/** Runs `ids` through `handle` 16 at a time; the seconds it took. */
async function run(handle: (m: InboundMessage) => Promise<unknown>, ids: readonly string[]): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await handle(delivery(ids[next++]!));
    }),
  );
  return (performance.now() - started) / 1000;
}

/** A storm block: `size` deliveries, 90% duplicates of `completed`, 10% new ids (added to `completed`). */
function storm(completed: string[], prefix: string, size: number): string[] {
  const ids: string[] = [];
  for (let i = 0; i < size; i++) {
    if (Math.random() < DUPLICATE_SHARE) ids.push(completed[Math.floor(Math.random() * completed.length)]!);
    else {
      const id = `${prefix}-new-${randomUUID()}`;
      ids.push(id);
      completed.push(id);
    }
  }
  return ids;
}

type Variant =
  | 'storm, no fast path'
  | 'storm, fast path'
  | 'first, no fast path'
  | 'first, fast path'
  | 'dup, no fast path'
  | 'dup, fast path';
const rates: Record<Variant, number[]> = {
  'storm, no fast path': [],
  'storm, fast path': [],
  'first, no fast path': [],
  'first, fast path': [],
  'dup, no fast path': [],
  'dup, fast path': [],
};
const stormRatios: number[] = [];
const firstRatios: number[] = [];
/** Per round: the storm's ceiling from that round's first and dup rates (see the top of the file). */
const ceilings: number[] = [];
/** Blocks per round: the variants take turns block by block, so a burst of load elsewhere hits both. */
const BLOCKS = 6;

/**
 * One round: two fresh consumers (without and with the fast path), each running BLOCKS blocks of first
 * deliveries and BLOCKS storm blocks (duplicates of the ids it completed so far), the two variants taking turns
 * block by block, the order flipping every block. Rates are deliveries over the summed time of a variant's blocks.
 */
async function measure(round: number): Promise<void> {
  const variants = [false, true].map((withFastPath) => ({
    withFastPath,
    label: withFastPath ? 'fast path' : 'no fast path',
    name: `bench-${runId}-${round}-${withFastPath ? 'fp' : 'plain'}`,
    consumer: consumer(`bench-${runId}-${round}-${withFastPath ? 'fp' : 'plain'}`, withFastPath),
    completed: [] as string[],
    firstSeconds: 0,
    stormSeconds: 0,
    dupSeconds: 0,
  }));
  const firstSize = Math.max(16, Math.round(N / 2 / BLOCKS));
  const stormSize = Math.max(16, Math.round(N / BLOCKS));
  const dupSize = firstSize;
  for (let block = 0; block < BLOCKS; block++) {
    const order = (block + round) % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const ids = Array.from({ length: firstSize }, (_, i) => `${v.name}-first-${block}-${i}`);
      v.firstSeconds += await run((m) => v.consumer.handle(m), ids);
      v.completed.push(...ids);
    }
    for (const v of order)
      v.stormSeconds += await run((m) => v.consumer.handle(m), storm(v.completed, v.name, stormSize));
    for (const v of order) {
      const ids = Array.from(
        { length: dupSize },
        () => v.completed[Math.floor(Math.random() * v.completed.length)]!,
      );
      v.dupSeconds += await run((m) => v.consumer.handle(m), ids);
    }
  }
  for (const v of variants) {
    rates[`first, ${v.label}` as Variant].push((firstSize * BLOCKS) / v.firstSeconds);
    rates[`storm, ${v.label}` as Variant].push((stormSize * BLOCKS) / v.stormSeconds);
    rates[`dup, ${v.label}` as Variant].push((dupSize * BLOCKS) / v.dupSeconds);
  }
}

/** Round `r`'s storm ceiling: time per delivery of 10% first and 90% dup, without the fast path over with it. */
function ceiling(r: number): number {
  const per = (v: Variant): number => 1 / rates[v][r]!;
  return (
    (0.1 * per('first, no fast path') + 0.9 * per('dup, no fast path')) /
    (0.1 * per('first, fast path') + 0.9 * per('dup, fast path'))
  );
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  // Warm-up: connections, prepared claims, JIT.
  const warm = consumer(`bench-${runId}-warm`, true);
  await run(
    (m) => warm.handle(m),
    Array.from({ length: 500 }, (_, i) => `warm-${i % 250}`),
  );
  for (let round = 0; round < ROUNDS; round++) {
    await measure(round);
    stormRatios.push(rates['storm, fast path'][round]! / rates['storm, no fast path'][round]!);
    firstRatios.push(rates['first, fast path'][round]! / rates['first, no fast path'][round]!);
    ceilings.push(ceiling(round));
    process.stdout.write(
      `round ${round + 1}: storm ${stormRatios[round]!.toFixed(2)}× (${Math.round(rates['storm, fast path'][round]!)} vs ${Math.round(rates['storm, no fast path'][round]!)} deliveries/s), ` +
        `first ${firstRatios[round]!.toFixed(2)}× (${Math.round(rates['first, fast path'][round]!)} vs ${Math.round(rates['first, no fast path'][round]!)}), ` +
        `dup ${Math.round(rates['dup, fast path'][round]!)} vs ${Math.round(rates['dup, no fast path'][round]!)}, storm ceiling ${ceilings[round]!.toFixed(2)}×\n`,
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
      `storm ceiling from the rounds' first and dup rates: ${median(ceilings).toFixed(2)}× (min ${Math.min(...ceilings).toFixed(2)}, max ${Math.max(...ceilings).toFixed(2)})\n` +
      `effects applied twice: ${duplicatesApplied.rows[0]!.n}\n` +
      `fast-path lookups: ${[...lookups].map(([result, n]) => `${result} ${n}`).join(', ')}\n`,
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
      ceiling: {
        median: median(ceilings),
        min: Math.min(...ceilings),
        max: Math.max(...ceilings),
        ratios: ceilings,
      },
      appliedTwice: duplicatesApplied.rows[0]!.n,
      lookups: Object.fromEntries(lookups),
    })}\n`,
  );
} finally {
  await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  await db.destroy();
  await redis.quit();
}
