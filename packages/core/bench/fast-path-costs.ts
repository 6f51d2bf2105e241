// Where a delivery's time goes, with and without the fast path: per delivery, Node's CPU (process.cpuUsage),
// the CPU of the pool's Postgres backends (/proc/<pid>/stat), Redis' CPU (INFO cpu) and the commands the fast
// path sent (round trips; a batch is one), for four workloads at concurrency 16 on the real services:
//
//   first, inbox      new ids, no fast path (claim + one-row effect + commit)
//   first, fast path  new ids with redisFastPath (lookups sampled while nothing hits, a SET after each commit)
//   dup, inbox        ids already completed, no fast path (the claim's round trip answers duplicate)
//   dup, fast path    ids already completed and cached: Redis answers
//
// On a 2-core machine that Node, Postgres and Redis share, throughput at saturation is bounded by the CPU a
// delivery costs all three together, whatever else runs; so the storm's ceiling follows from these costs:
// (0.1·first + 0.9·dup) without the fast path over the same with it. CPU per delivery is far steadier on a busy
// machine than throughput is.
//
// `--baseline DIR` loads a second implementation of core's src (a copy at another commit, made with
// `git archive REF packages/core/src | tar -x -C packages/core/.bench-baseline/REF`) and runs both in the same
// process, block by block in alternating order, for an A/B of a change: "A" is this checkout's src.
// `--baseline same --b-command-options '{"timeout":0}'` compares this src with itself, B's Redis commands sent
// with those node-redis command options (an A/B of a client setting).
//
//   node --conditions=@inboxkit/source --import tsx packages/core/bench/fast-path-costs.ts \
//     [--deliveries 4000] [--rounds 3] [--only dup-fp] [--baseline packages/core/.bench-baseline/REF/packages/core/src]
//
// Profiling: run it under `node --cpu-prof --cpu-prof-dir DIR …` with `--profile DIR`; the bench then writes
// DIR/windows.json, each measured workload's start and end on the profile's clock (CLOCK_MONOTONIC, µs), so
// the samples of one workload can be told from the set-up's.

import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { MeterProvider } from '@opentelemetry/api';
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { createClient } from 'redis';
import type * as ConsumerModule from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import type { Outcome } from '../src/outcome.js';
import { fastPathScope } from '../src/fast-path.js';
import { migrateInbox, PostgresInboxStore } from '../src/postgres/index.js';
import type * as RedisModule from '../src/redis/index.js';
import { databaseUrl } from './database-url.js';

const { values } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '3' },
    only: { type: 'string' },
    baseline: { type: 'string' },
    'b-command-options': { type: 'string' },
    profile: { type: 'string' },
    'timeout-ms': { type: 'string', default: '20' },
  },
});
const N = Number(values.deliveries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;
const TIMEOUT_MS = Number(values['timeout-ms']);
const WORKLOADS = ['first-inbox', 'first-fp', 'dup-inbox', 'dup-fp'] as const;
type Workload = (typeof WORKLOADS)[number];
const only = values.only === undefined ? [...WORKLOADS] : (values.only.split(',') as Workload[]);

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

/** What the bench uses of an implementation of core. */
interface Implementation {
  readonly label: string;
  /** node-redis command options for this implementation's fast-path commands (e.g. `{ "timeout": 0 }`). */
  commandOptions?: Record<string, unknown>;
  readonly idempotentConsumer: typeof ConsumerModule.idempotentConsumer;
  readonly redisFastPath: typeof RedisModule.redisFastPath;
}

async function loadImplementation(label: string, dir: string): Promise<Implementation> {
  const url = (file: string): string => pathToFileURL(resolve(dir, file)).href;
  const consumer = (await import(url('idempotent-consumer.ts'))) as typeof ConsumerModule;
  const redis = (await import(url('redis/index.ts'))) as typeof RedisModule;
  return { label, idempotentConsumer: consumer.idempotentConsumer, redisFastPath: redis.redisFastPath };
}

const implementations: Implementation[] = [
  await loadImplementation('A', fileURLToPath(new URL('../src/', import.meta.url))),
];
if (values.baseline !== undefined) {
  const b = await loadImplementation(
    'B',
    values.baseline === 'same' ? fileURLToPath(new URL('../src/', import.meta.url)) : values.baseline,
  );
  if (values['b-command-options'] !== undefined)
    b.commandOptions = JSON.parse(values['b-command-options']) as Record<string, unknown>;
  implementations.push(b);
}

interface DB {
  fpc_effects: { message_id: string };
}
const runId = randomUUID().slice(0, 8);
const schema = `bench_fp_costs_${runId}`;
// Idle connections stay open: their backends' CPU is read from /proc until the end.
const pool = new pg.Pool({ connectionString: databaseUrl(), max: CONCURRENCY + 2, idleTimeoutMillis: 0 });
const backends = new Set<number>();
pool.on('connect', (client) => {
  const pid = (client as unknown as { processID?: number }).processID;
  if (typeof pid === 'number') backends.add(pid);
});
const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
const redis = createClient({ url: redisUrl(), disableOfflineQueue: true });
redis.on('error', () => undefined);
await redis.connect();
await migrateInbox(db, { schema });
await sql.raw(`CREATE TABLE "${schema}".fpc_effects (message_id text NOT NULL)`).execute(db);
const store = new PostgresInboxStore({ db, schema });

/** The fast paths' client: the same connection, with a count of the commands sent (round trips). */
let roundTrips = 0;
const countingClient = (options: Record<string, unknown> | undefined) => ({
  sendCommand: (args: string[], given?: Record<string, unknown>): Promise<unknown> => {
    roundTrips += 1;
    // --b-command-options replaces what redisFastPath passes (an A/B of a client setting).
    const chosen = options ?? given;
    return chosen === undefined ? redis.sendCommand(args) : redis.sendCommand(args, chosen);
  },
});

/** CPU time (µs) of the pool's Postgres backends so far; NaN when they cannot be read (remote Postgres). */
function backendsCpuUs(): number {
  let ticks = 0;
  for (const pid of backends) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      return Number.NaN;
    }
  }
  return ticks * 10_000; // USER_HZ = 100
}

/** Redis' CPU (µs) and commands processed so far. */
async function redisCounters(): Promise<{ cpuUs: number; commands: number }> {
  const answer = await redis.sendCommand(['INFO', 'cpu']);
  const info = typeof answer === 'string' ? answer : Buffer.isBuffer(answer) ? answer.toString('utf8') : '';
  const field = (name: string): number =>
    Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return { cpuUs: (field('used_cpu_user') + field('used_cpu_sys')) * 1e6, commands: roundTrips };
}

/** Fast-path lookups by implementation and result (the consumers' `inboxkit.fast_path` counter). */
const lookups = new Map<string, number>();
function countingMeters(label: string): MeterProvider {
  return {
    getMeter: () => ({
      createCounter: (name: string) => ({
        add: (value: number, attributes?: Record<string, unknown>) => {
          if (name !== 'inboxkit.fast_path') return;
          const key = `${label} ${String(attributes?.['result'])}`;
          lookups.set(key, (lookups.get(key) ?? 0) + value);
        },
      }),
      createHistogram: () => ({ record: () => undefined }),
    }),
  } as unknown as MeterProvider;
}

interface Cost {
  nodeUs: number;
  pgUs: number;
  redisUs: number;
  redisCommands: number;
  seconds: number;
  deliveries: number;
}
const costs = new Map<string, Cost[]>();

/** Each measured workload's time window, in µs of CLOCK_MONOTONIC (the clock of V8's CPU profiles). */
const windows: { key: string; start: number; end: number }[] = [];
const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

async function drive(
  key: string,
  handle: (m: InboundMessage) => Promise<Outcome>,
  ids: readonly string[],
  expect: Outcome['status'],
): Promise<void> {
  let next = 0;
  const w0 = monotonicUs();
  const r0 = await redisCounters();
  const pg0 = backendsCpuUs();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const outcome = await handle({
          id,
          body: JSON.stringify({ id, amount: 100 }),
          headers: {},
          source: { transport: 'bench' },
        });
        if (outcome.status !== expect)
          throw new Error(`${key}: expected ${expect}, got ${JSON.stringify(outcome)}`);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const pgUs = backendsCpuUs() - pg0;
  windows.push({ key, start: w0, end: monotonicUs() });
  const r1 = await redisCounters();
  const list = costs.get(key) ?? [];
  list.push({
    nodeUs: cpu.user + cpu.system,
    pgUs,
    redisUs: r1.cpuUs - r0.cpuUs,
    redisCommands: r1.commands - r0.commands,
    seconds,
    deliveries: ids.length,
  });
  costs.set(key, list);
}

/** Waits until Redis holds every key the consumer wrote after its commits (the writes are not awaited). */
async function cached(name: string, ids: readonly string[]): Promise<void> {
  const scope = fastPathScope(await store.identity(), name);
  const last = `inboxkit:fp:${scope.length}:${scope}:${ids[ids.length - 1]!}`;
  for (let i = 0; i < 500 && (await redis.exists(last)) === 0; i++)
    await new Promise((r) => setTimeout(r, 10));
}

async function round(r: number): Promise<void> {
  const order = r % 2 === 0 ? implementations : [...implementations].reverse();
  for (const withFastPath of [false, true]) {
    for (const impl of order) {
      const name = `fpc-${runId}-${r}-${impl.label}-${withFastPath ? 'fp' : 'inbox'}`;
      const consumer = impl.idempotentConsumer<unknown, Transaction<DB>>({
        name,
        store,
        ...(withFastPath
          ? {
              fastPath: impl.redisFastPath({
                client: countingClient(impl.commandOptions),
                timeoutMs: TIMEOUT_MS,
              }),
            }
          : {}),
        meterProvider: countingMeters(impl.label),
        handler: async (m, { tx }) => {
          await tx.withSchema(schema).insertInto('fpc_effects').values({ message_id: m.id }).execute();
        },
      });
      const handle = (m: InboundMessage): Promise<Outcome> => consumer.handle(m);
      const ids = Array.from({ length: N }, (_, i) => `${name}-${i}`);
      const v = withFastPath ? 'fp' : 'inbox';
      const first = `first-${v}` as Workload;
      if (only.includes(first)) await drive(`${impl.label} ${first}`, handle, ids, 'processed');
      else
        await Promise.all(
          ids.map((id) =>
            handle({
              id,
              body: JSON.stringify({ id, amount: 100 }),
              headers: {},
              source: { transport: 'bench' },
            }),
          ),
        );
      const dup = `dup-${v}` as Workload;
      if (only.includes(dup)) {
        if (withFastPath) {
          await cached(name, ids);
          // Let the consumer see hits before measuring (lookups are sampled after a run of first deliveries).
          for (let i = 0; i < 64; i++)
            await handle({
              id: ids[i]!,
              body: JSON.stringify({ id: ids[i]!, amount: 100 }),
              headers: {},
              source: { transport: 'bench' },
            });
        }
        await drive(`${impl.label} ${dup}`, handle, ids, 'duplicate');
      }
    }
  }
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  await round(-1); // warm-up: JIT, connections, prepared statements (not reported)
  costs.clear();
  lookups.clear();
  windows.length = 0;
  for (let r = 0; r < ROUNDS; r++) await round(r);
  const per = (key: string, f: (c: Cost) => number): number =>
    median((costs.get(key) ?? []).map((c) => f(c) / c.deliveries));
  const rows: string[] = [];
  const summary: Record<string, Record<string, number>> = {};
  for (const impl of implementations) {
    for (const w of only) {
      const key = `${impl.label} ${w}`;
      if (!costs.has(key)) continue;
      const s = {
        nodeUs: per(key, (c) => c.nodeUs),
        pgUs: per(key, (c) => c.pgUs),
        redisUs: per(key, (c) => c.redisUs),
        redisCommands: per(key, (c) => c.redisCommands),
        perSecond: 1 / per(key, (c) => c.seconds),
      };
      summary[key] = s;
      rows.push(
        `| ${key} | ${s.nodeUs.toFixed(0)} | ${s.pgUs.toFixed(0)} | ${s.redisUs.toFixed(1)} | ${(s.nodeUs + s.pgUs + s.redisUs).toFixed(0)} | ${s.redisCommands.toFixed(2)} | ${s.perSecond.toFixed(0)} |`,
      );
    }
  }
  process.stdout.write(
    `per delivery, median of ${ROUNDS} rounds of ${N} at c=${CONCURRENCY}\n\n` +
      '| workload | Node CPU µs | Postgres CPU µs | Redis CPU µs | total CPU µs | Redis round trips | deliveries/s |\n|---|---:|---:|---:|---:|---:|---:|\n' +
      rows.join('\n') +
      '\n',
  );
  if (implementations.length === 2) {
    // The A/B: per round, A's total CPU per delivery over B's (the two ran block by block in the same round).
    for (const w of only) {
      const a = costs.get(`A ${w}`) ?? [];
      const b = costs.get(`B ${w}`) ?? [];
      const ratio = (f: (c: Cost) => number): number[] =>
        a.map((c, i) => f(c) / c.deliveries / (f(b[i]!) / b[i]!.deliveries));
      const spread = (xs: number[]): string =>
        `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
      process.stdout.write(
        `A/B ${w}: total CPU ${spread(ratio((c) => c.nodeUs + c.pgUs + c.redisUs))}, Node CPU ${spread(ratio((c) => c.nodeUs))}, ` +
          `Redis CPU ${spread(ratio((c) => c.redisUs))}, throughput ${spread(a.map((c, i) => b[i]!.seconds / b[i]!.deliveries / (c.seconds / c.deliveries)))}\n`,
      );
    }
  }
  for (const impl of implementations) {
    const total = (w: Workload): number | undefined => {
      const s = summary[`${impl.label} ${w}`];
      return s === undefined ? undefined : s['nodeUs']! + s['pgUs']! + s['redisUs']!;
    };
    const [fi, ff, di, df] = [total('first-inbox'), total('first-fp'), total('dup-inbox'), total('dup-fp')];
    if (fi !== undefined && ff !== undefined && di !== undefined && df !== undefined) {
      const ceiling = (0.1 * fi + 0.9 * di) / (0.1 * ff + 0.9 * df);
      process.stdout.write(
        `${impl.label}: storm ceiling from CPU per delivery (0.1·first + 0.9·dup, inbox over fast path): ${ceiling.toFixed(2)}×; ` +
          `first deliveries: ${(fi / ff).toFixed(2)}×; a duplicate via Redis costs ${((df / di) * 100).toFixed(0)}% of one via the inbox\n`,
      );
    }
  }
  if (values.profile !== undefined) {
    mkdirSync(values.profile, { recursive: true });
    writeFileSync(`${values.profile}/windows.json`, JSON.stringify(windows));
  }
  process.stdout.write(
    `fast-path lookups (all rounds, warm-up excluded): ${[...lookups].map(([k, n]) => `${k} ${n}`).join(', ')}\n`,
  );
  process.stdout.write(
    `BENCH_RESULT ${JSON.stringify({ deliveries: N, rounds: ROUNDS, concurrency: CONCURRENCY, summary })}\n`,
  );
} finally {
  await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  await db.destroy();
  await redis.quit();
}
