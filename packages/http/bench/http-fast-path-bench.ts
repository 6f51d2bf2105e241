// The Idempotency-Key middleware's fast path, measured: the same endpoint (one Postgres INSERT in the handler's
// transaction, the stored response) with and without `fastPath: redisFastPath()` on the real Redis, side by side
// in alternating blocks. A node:http server in its own process serves both (`/idem` without, `/idem-fp` with, each
// its own idempotencyKeys() on its own table); this process drives it over keep-alive HTTP at concurrency 16.
//
//   storm: 90% of the requests are retries of keys that completed (the same body), 10% new keys.
//   first: new keys only: what the fast path's lookup (a miss) and its write after the commit cost a request it
//          cannot help.
//   dup:   retries only (keys completed earlier in the round): a replay from Postgres, and one from Redis. With
//          `first`, it gives the storm's ceiling: (0.1·first + 0.9·dup without) / (0.1·first + 0.9·dup with), in
//          time per request.
//
// The figure is the median of the rounds' ratios (with fast path / without), with their min–max; the variants
// take turns block by block, the order flipping every block, so load from elsewhere falls on both.
//
//   node --conditions=@inboxkit/source --import tsx packages/http/bench/http-fast-path-bench.ts [--requests 4000] [--rounds 5]

import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { redisFastPath } from '@inboxkit/core/redis';
import { Kysely, PostgresDialect, sql, type Generated } from 'kysely';
import pg from 'pg';
import { createClient } from 'redis';
import { printResult, setting } from '../../../bench/settings.js';
import { idempotencyKeys, migrateIdempotencyKeys } from '@inboxkit/http';
import { idempotentNodeHandler } from '@inboxkit/http/node';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '16' },
    // Internal: run as the server process.
    serve: { type: 'boolean', default: false },
    schema: { type: 'string' },
  },
});
const DUPLICATE_SHARE = 0.9;
const BLOCKS = 6;

interface BenchDB {
  effects: { seq: Generated<string>; ref: string; amount_cents: number };
}

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

function openDb(schema: string, max: number): Kysely<BenchDB> {
  const pool = new pg.Pool({
    connectionString: setting('DATABASE_URL'),
    max,
    options: `-c search_path=${schema}`,
  });
  pool.on('error', () => undefined);
  return new Kysely<BenchDB>({ dialect: new PostgresDialect({ pool }) });
}

// ── the server process ──────────────────────────────────────────────────────────────────────────────────────

async function serve(schema: string, poolSize: number): Promise<void> {
  const db = openDb(schema, poolSize);
  const redis = createClient({ url: redisUrl(), disableOfflineQueue: true });
  redis.on('error', () => undefined);
  await redis.connect();
  const handlerOf = (fastPath: boolean) =>
    idempotentNodeHandler(
      idempotencyKeys<BenchDB, IncomingMessage>({
        db,
        schema,
        table: fastPath ? 'keys_fp' : 'keys_plain',
        principal: () => 'bench',
        ...(fastPath ? { fastPath: redisFastPath({ client: redis }) } : {}),
      }),
      async (_request, body, context) =>
        context.transaction(async (tx) => {
          const { ref, amountCents } = body as { ref: string; amountCents: number };
          const row = await tx
            .insertInto('effects')
            .values({ ref, amount_cents: amountCents })
            .returning('seq')
            .executeTakeFirstOrThrow();
          return { status: 201, body: { id: row.seq } };
        }),
    );
  const plain = handlerOf(false);
  const withFastPath = handlerOf(true);
  const server = createServer((request, response) =>
    request.url === '/idem-fp' ? withFastPath(request, response) : plain(request, response),
  );
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`READY ${(server.address() as AddressInfo).port}\n`);
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
    void Promise.allSettled([db.destroy(), redis.quit()]).then(() => process.exit(0));
  });
}

if (args.serve) {
  await serve(args.schema!, Number(args.concurrency) + 4);
} else {
  await drive();
}

// ── the load generator ──────────────────────────────────────────────────────────────────────────────────────

async function drive(): Promise<void> {
  const requests = Number(args.requests);
  const rounds = Number(args.rounds);
  const concurrency = Number(args.concurrency);
  const started = performance.now();
  const schema = `bench_http_fp_${randomBytes(4).toString('hex')}`;
  const db = openDb('public', 2);
  await sql.raw(`CREATE SCHEMA ${schema}`).execute(db);
  for (const table of ['keys_plain', 'keys_fp'])
    await migrateIdempotencyKeys(db, { schema, table, migrationTable: `${table}_migrations` });
  await sql
    .raw(
      `CREATE TABLE ${schema}.effects (seq bigserial PRIMARY KEY, ref text NOT NULL, amount_cents integer NOT NULL)`,
    )
    .execute(db);

  const server = spawn(
    process.execPath,
    [
      '--conditions=@inboxkit/source',
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      '--serve',
      '--schema',
      schema,
      '--concurrency',
      String(concurrency),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    server.once('exit', (code) =>
      reject(new Error(`the server process exited (${code}) before it was ready`)),
    );
    createInterface({ input: server.stdout }).on('line', (line) => {
      const m = /^READY (\d+)$/.exec(line);
      if (m !== null) resolve(Number(m[1]));
    });
  });
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });

  function post(path: string, key: string, ref: string): Promise<{ status: number; replayed: boolean }> {
    const body = JSON.stringify({ ref, amountCents: 1_234 });
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path,
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'idempotency-key': key,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, replayed: res.headers['idempotent-replayed'] === 'true' }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  interface Item {
    readonly key: string;
    readonly ref: string;
    readonly retry: boolean;
  }
  /** Runs `items` 16 at a time against `path`, every answer checked; the seconds it took. */
  async function run(path: string, items: readonly Item[]): Promise<number> {
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = next++; i < items.length; i = next++) {
          const item = items[i]!;
          const r = await post(path, item.key, item.ref);
          if (r.status !== 201 || (item.retry && !r.replayed))
            throw new Error(`${path}: unexpected answer ${r.status} (replayed ${r.replayed})`);
        }
      }),
    );
    return (performance.now() - t0) / 1000;
  }
  const fresh = (n: number): Item[] =>
    Array.from({ length: n }, () => ({ key: randomUUID(), ref: randomUUID(), retry: false }));
  /**
   * A storm block: 90% retries of `completed` (each answered by a replay), 10% new keys, which join `completed`
   * once the block is over (a retry while the first request is in flight would be a 409).
   */
  async function stormBlock(path: string, completed: Item[], size: number): Promise<number> {
    const items: Item[] = [];
    const added: Item[] = [];
    for (let i = 0; i < size; i++) {
      if (Math.random() < DUPLICATE_SHARE)
        items.push({ ...completed[Math.floor(Math.random() * completed.length)]!, retry: true });
      else {
        const item = fresh(1)[0]!;
        items.push(item);
        added.push({ ...item, retry: true });
      }
    }
    const seconds = await run(path, items);
    completed.push(...added);
    return seconds;
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
  const ceilings: number[] = [];
  /** Round `r`'s storm ceiling: time per request of 10% first and 90% dup, without the fast path over with it. */
  const ceiling = (r: number): number => {
    const per = (v: Variant): number => 1 / rates[v][r]!;
    return (
      (0.1 * per('first, no fast path') + 0.9 * per('dup, no fast path')) /
      (0.1 * per('first, fast path') + 0.9 * per('dup, fast path'))
    );
  };
  const median = (xs: readonly number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  try {
    // Warm-up: connections, JIT, both tables' first pages, the fast path's client.
    for (const path of ['/idem', '/idem-fp']) {
      const warm = fresh(200);
      await run(path, warm);
      await stormBlock(
        path,
        warm.map((item) => ({ ...item, retry: true })),
        300,
      );
    }
    for (let round = 0; round < rounds; round++) {
      const variants = [
        {
          label: 'no fast path',
          path: '/idem',
          completed: [] as Item[],
          firstSeconds: 0,
          stormSeconds: 0,
          dupSeconds: 0,
        },
        {
          label: 'fast path',
          path: '/idem-fp',
          completed: [] as Item[],
          firstSeconds: 0,
          stormSeconds: 0,
          dupSeconds: 0,
        },
      ];
      const firstSize = Math.max(16, Math.round(requests / 2 / BLOCKS));
      const stormSize = Math.max(16, Math.round(requests / BLOCKS));
      for (let block = 0; block < BLOCKS; block++) {
        const order = (block + round) % 2 === 0 ? variants : [...variants].reverse();
        for (const v of order) {
          const items = fresh(firstSize);
          v.firstSeconds += await run(v.path, items);
          v.completed.push(...items.map((item) => ({ ...item, retry: true })));
        }
        for (const v of order) v.stormSeconds += await stormBlock(v.path, v.completed, stormSize);
        for (const v of order) {
          const retries = Array.from(
            { length: firstSize },
            () => v.completed[Math.floor(Math.random() * v.completed.length)]!,
          );
          v.dupSeconds += await run(v.path, retries);
        }
      }
      for (const v of variants) {
        rates[`first, ${v.label}` as Variant].push((firstSize * BLOCKS) / v.firstSeconds);
        rates[`storm, ${v.label}` as Variant].push((stormSize * BLOCKS) / v.stormSeconds);
        rates[`dup, ${v.label}` as Variant].push((firstSize * BLOCKS) / v.dupSeconds);
      }
      stormRatios.push(rates['storm, fast path'][round]! / rates['storm, no fast path'][round]!);
      firstRatios.push(rates['first, fast path'][round]! / rates['first, no fast path'][round]!);
      ceilings.push(ceiling(round));
      process.stdout.write(
        `round ${round + 1}: storm ${stormRatios[round]!.toFixed(2)}× (${Math.round(rates['storm, fast path'][round]!)} vs ${Math.round(rates['storm, no fast path'][round]!)} requests/s), ` +
          `first ${firstRatios[round]!.toFixed(2)}× (${Math.round(rates['first, fast path'][round]!)} vs ${Math.round(rates['first, no fast path'][round]!)}), ` +
          `dup ${Math.round(rates['dup, fast path'][round]!)} vs ${Math.round(rates['dup, no fast path'][round]!)}, storm ceiling ${ceilings[round]!.toFixed(2)}×\n`,
      );
    }
    // Every key ran its handler once: one effect per ref.
    const twice = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM (SELECT ref FROM ${sql.table(`${schema}.effects`)}
      GROUP BY ref HAVING count(*) > 1) AS twice`.execute(db);
    const appliedTwice = twice.rows[0]!.n;
    process.stdout.write(
      `\n| variant | requests/s (median of ${rounds} rounds) | min | max |\n|---|---:|---:|---:|\n` +
        (Object.keys(rates) as Variant[])
          .map(
            (v) =>
              `| ${v} | ${Math.round(median(rates[v]))} | ${Math.round(Math.min(...rates[v]))} | ${Math.round(Math.max(...rates[v]))} |`,
          )
          .join('\n') +
        '\n\n' +
        `storm (90% retries, c=${concurrency}) fast path / no fast path: ${median(stormRatios).toFixed(2)}× (min ${Math.min(...stormRatios).toFixed(2)}, max ${Math.max(...stormRatios).toFixed(2)}; target ≥ 3×)\n` +
        `first requests fast path / no fast path: ${median(firstRatios).toFixed(2)}× (min ${Math.min(...firstRatios).toFixed(2)}, max ${Math.max(...firstRatios).toFixed(2)}; target ≥ 0.95×)\n` +
        `storm ceiling from the rounds' first and dup rates: ${median(ceilings).toFixed(2)}× (min ${Math.min(...ceilings).toFixed(2)}, max ${Math.max(...ceilings).toFixed(2)})\n` +
        `handlers run twice: ${appliedTwice}\nelapsed ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
    );
    const spread = (ratios: number[]) => ({
      median: median(ratios),
      min: Math.min(...ratios),
      max: Math.max(...ratios),
      ratios,
    });
    printResult({
      requests,
      rounds,
      concurrency,
      duplicateShare: DUPLICATE_SHARE,
      rates,
      storm: spread(stormRatios),
      first: spread(firstRatios),
      ceiling: spread(ceilings),
      appliedTwice,
    });
  } finally {
    agent.destroy();
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
    await sql.raw(`DROP SCHEMA ${schema} CASCADE`).execute(db);
    await db.destroy();
  }
}
