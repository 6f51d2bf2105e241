// How far one Postgres primary goes: messages per second per core of CPU actually spent, for handle() and
// handleBatch(), and where the limit is (docs/operations.md, "Capacity of one primary").
//
//   npm run bench:capacity            three rounds of 20 s per phase (about 3 minutes)
//   npm run bench:capacity -- --quick one round of 7 s per phase (under a minute)
//   options: --seconds 20 --rounds 3 --concurrency 16 --batch 50 --only handle|batch
//
// The workload is the inbox's heaviest: first deliveries only (every message claims a new row and commits), a
// one-row effect in the handler's transaction (the same effect as packages/core/bench), at a fixed concurrency
// from one Node process, on the Postgres of DATABASE_URL (else .services/env), in a schema of its own that is
// dropped at the end. Each round times a handle() phase and a handleBatch() phase for a fixed wall time and
// reads, over exactly that phase:
//   - CPU: this Node process (process.cpuUsage), the pool's Postgres backends (/proc/<pid>/stat of each
//     connection's backend pid) and the server's own processes (every child of the postmaster that is not a
//     client backend: WAL writer, checkpointer, background writer, autovacuum), so the rate is per core of CPU
//     spent, whoever else uses the machine; the machine's busy time (/proc/stat) for context;
//   - WAL: pg_stat_wal (records, full-page images, bytes, writes, syncs) — cluster-wide, so other clients' writes
//     are in it — and, where pg_walinspect can be created, the WAL records of this run's own transactions (those
//     that touched the run's relations), with their commit records: exact per-message WAL and commits whatever
//     else runs;
//   - waits: pg_stat_activity of the pool's backends sampled every 100 ms (running, waiting for Node, WAL, locks)
//     and pg_locks not granted;
// and names the limit (bench/capacity-figures.ts, limitOf). Postgres must run on this machine for the CPU split
// (its /proc entries readable); elsewhere the Postgres columns are empty and the per-core rate is Node's only.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';

import { idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

import {
  classifyWait,
  counterDelta,
  limitOf,
  parseMachineStat,
  parseProcStat,
  perCore,
  ticksSpent,
  waitShares,
  type PerCore,
  type PhaseCpu,
  type ProcStat,
  type WaitClass,
} from './capacity-figures.js';
import { printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    rounds: { type: 'string' },
    concurrency: { type: 'string', default: '16' },
    batch: { type: 'string', default: '50' },
    // Run one phase only: `handle` or `batch`.
    only: { type: 'string' },
  },
});
const quick = values.quick;
const SECONDS = Number(values.seconds ?? (quick ? 7 : 20));
const ROUNDS = Number(values.rounds ?? (quick ? 1 : 3));
const CONCURRENCY = Number(values.concurrency);
const BATCH = Number(values.batch);
if (values.only !== undefined && values.only !== 'handle' && values.only !== 'batch')
  throw new Error(`--only takes handle or batch, got ${values.only}`);
for (const [name, v] of Object.entries({
  seconds: SECONDS,
  rounds: ROUNDS,
  concurrency: CONCURRENCY,
  batch: BATCH,
}))
  if (!(Number.isFinite(v) && v > 0)) throw new Error(`--${name} takes a positive number, got ${String(v)}`);

const log = (line: string): void =>
  void process.stderr.write(`[capacity ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
const CORES = cpus().length;

const schema = `bench_capacity_${randomBytes(4).toString('hex')}`;
const url = setting('DATABASE_URL');
const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY, idleTimeoutMillis: 0 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
/** Backend pids of the pool's connections (pg reports each in BackendKeyData). */
const backends = new Set<number>();
pool.on('connect', (client) => {
  const pid = (client as unknown as { processID?: number }).processID;
  if (typeof pid === 'number') backends.add(pid);
});
const sampler = new pg.Client({ connectionString: url });

const consumer = idempotentConsumer<{ id: string; amount: number }, Transaction<unknown>>({
  name: 'capacity',
  store: new PostgresInboxStore<unknown>({ db, schema }),
  handler: async (m, { tx }) => {
    await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${m.id}, ${m.payload.amount})`.execute(
      tx,
    );
  },
});

function message(id: string): InboundMessage {
  return { id, body: JSON.stringify({ id, amount: 42 }), headers: {}, source: { transport: 'bench' } };
}

// ── /proc ────────────────────────────────────────────────────────────────────────────────────────────────────

function procStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

function procCmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return '';
  }
}

let postmaster: number | undefined;
/** The server's own processes: the postmaster and its children that are not client backends. */
function serverProcesses(): Map<number, ProcStat> {
  const found = new Map<number, ProcStat>();
  if (postmaster === undefined) return found;
  const own = procStat(postmaster);
  if (own) found.set(postmaster, own);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = procStat(Number(entry));
    if (s === undefined || s.ppid !== postmaster) continue;
    // A client backend names itself `postgres: user database host(port) state`; the server's own processes
    // `postgres: walwriter`, `postgres: checkpointer`, `postgres: autovacuum worker`, ….
    const cmd = procCmdline(s.pid);
    if (/^postgres: \S+ \S+ \S+\(\d+\)|^postgres: \S+ \S+ \[local\]/.test(cmd)) continue;
    found.set(s.pid, s);
  }
  return found;
}

function backendStats(): Map<number, ProcStat> {
  const found = new Map<number, ProcStat>();
  for (const pid of backends) {
    const s = procStat(pid);
    if (s) found.set(pid, s);
  }
  return found;
}

function bootTicksNow(): number {
  // /proc/uptime is in seconds since boot; process start times are in ticks since boot.
  return Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * CLK_TCK;
}

// ── Postgres statistics ──────────────────────────────────────────────────────────────────────────────────────

const WAL_KEYS = [
  'wal_records',
  'wal_fpi',
  'wal_bytes',
  'wal_buffers_full',
  'wal_write',
  'wal_sync',
] as const;
type WalKey = (typeof WAL_KEYS)[number];

/** Makes every pool backend flush its statistics now (they do so at most once a second when idle, else later). */
async function flushBackendStats(): Promise<void> {
  const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => pool.connect()));
  try {
    await Promise.all(clients.map((c) => c.query('SELECT pg_stat_force_next_flush()')));
  } finally {
    for (const c of clients) c.release();
  }
}

async function walStats(): Promise<Record<WalKey, string> & { commits: string; lsn: string }> {
  const r = await sampler.query<Record<WalKey, string> & { commits: string; lsn: string }>(
    `SELECT ${WAL_KEYS.join(', ')},
            (SELECT sum(xact_commit) FROM pg_stat_database) AS commits,
            pg_current_wal_flush_lsn()::text AS lsn
       FROM pg_stat_wal`,
  );
  return r.rows[0]!;
}

let walinspect: string | undefined;
let relfilenodes: string[] = [];

interface OwnWal {
  readonly records: number;
  readonly bytes: number;
  readonly fpiBytes: number;
  readonly commits: number;
  readonly clusterRecords: number;
  readonly clusterBytes: number;
  readonly clusterCommits: number;
}

/** This run's own WAL between two LSNs: the records of transactions that touched the run's relations. */
async function ownWal(from: string, to: string): Promise<OwnWal | string> {
  if (walinspect === undefined) return 'pg_walinspect is not available';
  try {
    const r = await sampler.query<Record<string, string>>(
      `WITH r AS MATERIALIZED (
         SELECT xid::text AS xid, resource_manager, record_type, record_length, fpi_length, block_ref
           FROM "${walinspect}".pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)),
       ours AS (SELECT DISTINCT xid FROM r WHERE xid <> '0' AND block_ref ~ $3)
       SELECT count(*) FILTER (WHERE xid IN (SELECT xid FROM ours)) AS records,
              coalesce(sum(record_length) FILTER (WHERE xid IN (SELECT xid FROM ours)), 0) AS bytes,
              coalesce(sum(fpi_length) FILTER (WHERE xid IN (SELECT xid FROM ours)), 0) AS fpi_bytes,
              count(*) FILTER (WHERE xid IN (SELECT xid FROM ours) AND resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%') AS commits,
              count(*) AS cluster_records,
              coalesce(sum(record_length), 0) AS cluster_bytes,
              count(*) FILTER (WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%') AS cluster_commits
         FROM r`,
      [from, to, `rel \\d+/\\d+/(${relfilenodes.join('|')})( |$)`],
    );
    const row = r.rows[0]!;
    return {
      records: Number(row.records),
      bytes: Number(row.bytes),
      fpiBytes: Number(row.fpi_bytes),
      commits: Number(row.commits),
      clusterRecords: Number(row.cluster_records),
      clusterBytes: Number(row.cluster_bytes),
      clusterCommits: Number(row.cluster_commits),
    };
  } catch (error) {
    // Most often: a checkpoint during the phase recycled the segments holding its start.
    return `pg_walinspect could not read the phase's WAL: ${(error as Error).message}`;
  }
}

// ── one phase ────────────────────────────────────────────────────────────────────────────────────────────────

interface Phase {
  readonly name: string;
  readonly round: number;
  readonly messages: number;
  readonly wallSeconds: number;
  readonly cpu: PhaseCpu;
  /** CPU seconds of the sampler's own backend (the measurement's overhead, in no figure). */
  readonly samplerCpu: number;
  /** CPU seconds the sampling took in this process, taken out of Node's figure. */
  readonly samplerNodeCpu: number;
  readonly machineBusy: number;
  readonly figures: PerCore;
  readonly waits: Record<WaitClass, number>;
  readonly samples: number;
  readonly locksNotGranted: number;
  readonly othersActive: number;
  readonly wal: Record<WalKey | 'commits', number>;
  readonly own: OwnWal | string;
  readonly limit: { limit: string; why: string };
  readonly backendsLost: number;
}

let nextId = 0;
const newIds = (n: number): string[] => Array.from({ length: n }, () => `m-${nextId++}`);

async function phase(
  name: string,
  round: number,
  seconds: number,
  work: () => Promise<number>,
): Promise<Phase> {
  await flushBackendStats();
  const samplerPid = (sampler as unknown as { processID: number }).processID;
  const wal0 = await walStats();
  const start = {
    at: bootTicksNow(),
    backends: backendStats(),
    server: serverProcesses(),
    sampler: procStat(samplerPid),
  };
  const machine0 = parseMachineStat(readFileSync('/proc/stat', 'utf8'));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;

  // Sampling: the pool's backends in pg_stat_activity, and the server's processes (to catch short-lived ones).
  const classes: WaitClass[] = [];
  let locksNotGranted = 0;
  let othersActive = 0;
  let samples = 0;
  let samplerNodeUs = 0;
  let lastServer = start.server;
  let sampling = true;
  const sampling$ = (async () => {
    while (sampling) {
      const r = await sampler.query<{
        pid: number;
        state: string | null;
        wait_event_type: string | null;
        wait_event: string | null;
        waiting: string;
        others: string;
      }>(
        `SELECT a.pid, a.state, a.wait_event_type, a.wait_event,
                (SELECT count(*) FROM pg_locks l WHERE NOT l.granted AND l.pid = ANY($1)) AS waiting,
                (SELECT count(*) FROM pg_stat_activity o WHERE o.backend_type = 'client backend' AND o.state = 'active'
                   AND NOT (o.pid = ANY($1)) AND o.pid <> pg_backend_pid()) AS others
           FROM pg_stat_activity a WHERE a.pid = ANY($1)`,
        [[...backends]],
      );
      // The sampler's own CPU in this process (the /proc scan is about 2 ms of it) is measured and taken out
      // of Node's figure: it is the measurement's, not the consumer's.
      const own0 = process.cpuUsage();
      for (const row of r.rows) classes.push(classifyWait(row.state, row.wait_event_type, row.wait_event));
      if (r.rows.length > 0) {
        locksNotGranted += Number(r.rows[0]!.waiting);
        othersActive += Number(r.rows[0]!.others);
        samples += 1;
      }
      // Short-lived server processes (autovacuum workers) are caught by a scan every 500 ms.
      if (samples % 5 === 0) {
        const seen = serverProcesses();
        for (const [pid, s] of lastServer) if (!seen.has(pid)) seen.set(pid, s); // gone: keep its last reading
        lastServer = seen;
      }
      const own = process.cpuUsage(own0);
      samplerNodeUs += own.user + own.system;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();

  let messages = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        const handled = await work();
        messages += handled;
      }
    }),
  );
  const wallSeconds = (performance.now() - t0) / 1000;
  const cpuNode = process.cpuUsage(cpu0);
  const machine1 = parseMachineStat(readFileSync('/proc/stat', 'utf8'));
  const endBackends = backendStats();
  const endServer = serverProcesses();
  for (const [pid, s] of lastServer) if (!endServer.has(pid)) endServer.set(pid, s);
  const endSampler = procStat(samplerPid);
  sampling = false;
  await sampling$;

  await flushBackendStats();
  const wal1 = await walStats();
  const own = await ownWal(wal0.lsn, wal1.lsn);
  const cpu: PhaseCpu = {
    node: (cpuNode.user + cpuNode.system - samplerNodeUs) / 1e6,
    backends: ticksSpent(start.backends, endBackends, start.at) / CLK_TCK,
    background: ticksSpent(start.server, endServer, start.at) / CLK_TCK,
  };
  const waits = waitShares(classes);
  const machineBusy = (machine1.busy - machine0.busy) / CLK_TCK;
  const { lsn: _a, ...w0 } = wal0;
  const { lsn: _b, ...w1 } = wal1;
  return {
    name,
    round,
    messages,
    wallSeconds,
    cpu,
    samplerCpu:
      start.sampler && endSampler
        ? (endSampler.utime + endSampler.stime - start.sampler.utime - start.sampler.stime) / CLK_TCK
        : Number.NaN,
    samplerNodeCpu: samplerNodeUs / 1e6,
    machineBusy,
    figures: perCore(messages, cpu),
    waits,
    samples,
    locksNotGranted: samples === 0 ? 0 : locksNotGranted / samples,
    othersActive: samples === 0 ? 0 : othersActive / samples,
    wal: counterDelta(w0, w1, [...WAL_KEYS, 'commits']),
    own,
    limit: limitOf({ wallSeconds, cores: CORES, machineBusy, cpu, waits }),
    backendsLost: [...start.backends.keys()].filter((pid) => !endBackends.has(pid)).length,
  };
}

const handleOne = async (): Promise<number> => {
  const [id] = newIds(1);
  const o = await consumer.handle(message(id!));
  if (o.status !== 'processed') throw new Error(`${id}: expected processed, got ${JSON.stringify(o)}`);
  return 1;
};
const handleMany = async (): Promise<number> => {
  const outcomes = await consumer.handleBatch(newIds(BATCH).map(message));
  for (const o of outcomes)
    if (o.status !== 'processed') throw new Error(`expected processed, got ${JSON.stringify(o)}`);
  return outcomes.length;
};

// ── the run ──────────────────────────────────────────────────────────────────────────────────────────────────

const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';
const pct = (n: number): string => (Number.isFinite(n) ? `${(n * 100).toFixed(0)}%` : '—');
const range = (xs: number[]): string => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length < 2 ? '' : ` (${fmt(s[0]!)}–${fmt(s.at(-1)!)})`;
};
const median = (xs: number[]): number => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor((s.length - 1) / 2)]!;
};

const phases: Phase[] = [];
let settings: Record<string, string> = {};
const load0 = loadavg();
try {
  await sampler.connect();
  await migrateInbox(db, { schema });
  await pool.query(
    `CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`,
  );
  const s = await sampler.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method',
       'full_page_writes', 'shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'commit_delay', 'wal_level')`,
  );
  settings = Object.fromEntries(s.rows.map((r) => [r.name, r.setting]));
  // Fill the pool (every backend pid known, every connection open before the clock starts) and warm up.
  await Promise.all(Array.from({ length: CONCURRENCY * 20 }, () => handleOne()));
  await Promise.all(Array.from({ length: CONCURRENCY * 2 }, () => handleMany()));
  const first = [...backends][0]!;
  postmaster = procStat(first)?.ppid;
  if (postmaster === undefined) log('the Postgres backends are not on this machine: Node CPU only');
  try {
    await sampler.query(`CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA "${schema}"`);
    const e = await sampler.query<{ nspname: string }>(
      `SELECT n.nspname FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pg_walinspect'`,
    );
    walinspect = e.rows[0]?.nspname;
  } catch (error) {
    log(`pg_walinspect unavailable (${(error as Error).message}): WAL and commits are cluster-wide only`);
  }
  const rel = await sampler.query<{ node: string }>(
    `SELECT pg_relation_filenode(c.oid)::text AS node FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND pg_relation_filenode(c.oid) IS NOT NULL`,
    [schema],
  );
  relfilenodes = rel.rows.map((r) => r.node);
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order so that neither phase always runs on the bigger table or after the other's autovacuum.
    const order: [string, () => Promise<number>][] = [
      ['handle()', handleOne] as [string, () => Promise<number>],
      [`handleBatch(${BATCH})`, handleMany] as [string, () => Promise<number>],
    ].filter(([name]) => values.only === undefined || (values.only === 'handle') === (name === 'handle()'));
    if (round % 2 === 1) order.reverse();
    for (const [name, work] of order) {
      const p = await phase(name, round + 1, SECONDS, work);
      phases.push(p);
      log(
        `round ${round + 1}/${ROUNDS} ${name}: ${fmt(p.messages / p.wallSeconds)} msg/s wall, ${fmt(p.figures.perCore)} msg/s per core ` +
          `(Node ${fmt(p.cpu.node, 2)} s, backends ${fmt(p.cpu.backends, 2)} s, server ${fmt(p.cpu.background, 2)} s), limit: ${p.limit.limit}`,
      );
    }
  }
} finally {
  await sampler.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await sampler.end().catch(() => undefined);
  await db.destroy();
}

// ── report ───────────────────────────────────────────────────────────────────────────────────────────────────

const names = [...new Set(phases.map((p) => p.name))];
console.log(
  `\nOne Postgres primary, first deliveries with a one-row effect, concurrency ${CONCURRENCY}, ${ROUNDS} round(s) of ${SECONDS} s per phase; ` +
    `${CORES} cores, load ${load0.map((l) => l.toFixed(1)).join('/')} at start, Postgres ${settings.server_version ?? '?'} ` +
    `(synchronous_commit ${settings.synchronous_commit ?? '?'}, fsync ${settings.fsync ?? '?'}, wal_sync_method ${settings.wal_sync_method ?? '?'}). Medians over rounds (min–max where more than one).\n`,
);
console.log(
  '| phase | msg/s (wall) | msg/s per core (all CPU) | per Postgres core | per Node core | Node µs/msg | backends µs/msg | server µs/msg | Node share | machine busy | limit |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
const summary: Record<string, unknown> = {};
for (const name of names) {
  const ps = phases.filter((p) => p.name === name);
  const m = (f: (p: Phase) => number): number => median(ps.map(f));
  const perMsg = (f: (p: Phase) => number): number => m((p) => (f(p) / p.messages) * 1e6);
  const limits = ps.map((p) => p.limit.limit);
  const own = ps.map((p) => p.own).filter((o): o is OwnWal => typeof o !== 'string');
  const row = {
    wallRate: m((p) => p.messages / p.wallSeconds),
    perCore: m((p) => p.figures.perCore),
    perCoreRange: range(ps.map((p) => p.figures.perCore)),
    perPostgresCoreRange: range(ps.map((p) => p.figures.perPostgresCore)),
    perPostgresCore: m((p) => p.figures.perPostgresCore),
    perNodeCore: m((p) => p.figures.perNodeCore),
    nodeUs: perMsg((p) => p.cpu.node),
    backendsUs: perMsg((p) => p.cpu.backends),
    serverUs: perMsg((p) => p.cpu.background),
    nodeShare: m((p) => p.figures.nodeShare),
    machineBusy: m((p) => p.machineBusy / (p.wallSeconds * CORES)),
    nodeCoreUse: m((p) => p.cpu.node / p.wallSeconds),
    limits,
    waits: Object.fromEntries(
      (['cpu', 'node', 'wal', 'lock', 'lwlock', 'io', 'other'] as WaitClass[]).map((k) => [
        k,
        m((p) => p.waits[k]),
      ]),
    ) as Record<WaitClass, number>,
    locksNotGranted: m((p) => p.locksNotGranted),
    othersActive: m((p) => p.othersActive),
    clusterWalPerMsg: Object.fromEntries(
      [...WAL_KEYS, 'commits'].map((k) => [k, m((p) => p.wal[k as WalKey] / p.messages)]),
    ),
    clusterCommitsPerSecond: m((p) => p.wal.commits / p.wallSeconds),
    syncsPerClusterCommit: m((p) => p.wal.wal_sync / p.wal.commits),
    own:
      own.length === 0
        ? (ps.map((p) => p.own).find((o) => typeof o === 'string') ?? 'none')
        : {
            recordsPerMsg: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.records / p.messages])),
            ),
            bytesPerMsg: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.bytes / p.messages])),
            ),
            fpiBytesPerMsg: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.fpiBytes / p.messages])),
            ),
            commitsPerMsg: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.commits / p.messages])),
            ),
            commitsPerSecond: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.commits / p.wallSeconds])),
            ),
            shareOfClusterWal: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.bytes / p.own.clusterBytes])),
            ),
            shareOfClusterCommits: median(
              ps.flatMap((p) => (typeof p.own === 'string' ? [] : [p.own.commits / p.own.clusterCommits])),
            ),
          },
    samples: ps.reduce((a, p) => a + p.samples, 0),
    samplerCpuSeconds: ps.reduce((a, p) => a + p.samplerCpu, 0),
    samplerNodeCpuSeconds: ps.reduce((a, p) => a + p.samplerNodeCpu, 0),
    backendsLost: ps.reduce((a, p) => a + p.backendsLost, 0),
  };
  summary[name] = row;
  console.log(
    `| ${name} | ${fmt(row.wallRate)} | **${fmt(row.perCore)}**${row.perCoreRange} | ${fmt(row.perPostgresCore)}${row.perPostgresCoreRange} | ${fmt(row.perNodeCore)} | ${fmt(row.nodeUs)} | ${fmt(row.backendsUs)} | ${fmt(row.serverUs)} | ${pct(row.nodeShare)} | ${pct(row.machineBusy)} | ${[...new Set(limits)].join(', ')} |`,
  );
}
console.log('\nWhere the pool’s backends were (pg_stat_activity every 100 ms) and WAL per message:\n');
console.log(
  '| phase | running | waiting for Node | WAL | locks | other LWLock | other IO | other | locks not granted (mean) | other clients active (mean) |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const name of names) {
  const r = summary[name] as {
    waits: Record<WaitClass, number>;
    locksNotGranted: number;
    othersActive: number;
  };
  const w = r.waits;
  console.log(
    `| ${name} | ${pct(w.cpu)} | ${pct(w.node)} | ${pct(w.wal)} | ${pct(w.lock)} | ${pct(w.lwlock)} | ${pct(w.io)} | ${pct(w.other)} | ${fmt(r.locksNotGranted, 2)} | ${fmt(r.othersActive, 1)} |`,
  );
}
console.log('');
console.log(
  '| phase | own WAL records/msg | own WAL bytes/msg (of it FPI) | own commits/msg | own commits/s | cluster: WAL bytes/msg | cluster: wal_write/msg | cluster: wal_sync/msg | cluster commits/s | syncs per cluster commit | this run’s share of cluster WAL |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const name of names) {
  const r = summary[name] as {
    own: string | Record<string, number>;
    clusterWalPerMsg: Record<string, number>;
    clusterCommitsPerSecond: number;
    syncsPerClusterCommit: number;
  };
  const o = typeof r.own === 'string' ? undefined : r.own;
  console.log(
    `| ${name} | ${o ? fmt(o.recordsPerMsg!, 1) : '—'} | ${o ? `${fmt(o.bytesPerMsg!)} (${fmt(o.fpiBytesPerMsg!)})` : '—'} | ${o ? fmt(o.commitsPerMsg!, 3) : '—'} | ${o ? fmt(o.commitsPerSecond!) : '—'} | ` +
      `${fmt(r.clusterWalPerMsg.wal_bytes!)} | ${fmt(r.clusterWalPerMsg.wal_write!, 3)} | ${fmt(r.clusterWalPerMsg.wal_sync!, 3)} | ${fmt(r.clusterCommitsPerSecond)} | ${fmt(r.syncsPerClusterCommit, 2)} | ${o ? pct(o.shareOfClusterWal!) : '—'} |`,
  );
}
console.log('');
for (const name of names) {
  const own = (summary[name] as { own: unknown }).own;
  if (typeof own === 'string') console.log(`${name}: no own-WAL figures (${own}).`);
}
for (const p of phases) console.log(`- round ${p.round}, ${p.name}: limit ${p.limit.limit} — ${p.limit.why}`);
console.log(
  `\nThe measurement's own cost, in no figure above: the sampler's Postgres backend ${fmt(
    phases.reduce((a, p) => a + p.samplerCpu, 0),
    2,
  )} CPU s, its work in this process ${fmt(
    phases.reduce((a, p) => a + p.samplerNodeCpu, 0),
    2,
  )} CPU s (taken out of Node's), over ${fmt(phases.reduce((a, p) => a + p.wallSeconds, 0))} s of phases.`,
);
printResult({
  seconds: SECONDS,
  rounds: ROUNDS,
  concurrency: CONCURRENCY,
  batch: BATCH,
  cores: CORES,
  loadAtStart: load0,
  settings,
  phases: summary,
});
