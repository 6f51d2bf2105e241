// `npm run bench` / `npm run bench:quick`: every benchmark side by side in one run, written as Markdown.
//
//   npm run bench -- [--quick] [--source] [--out docs/benchmarks.md] [--only core,floor,cpu,pgbench,capacity,claim,partitions,crossday,fastpath,httpfastpath,kafka,rabbitmq,sqs,nats,outbox,http,data,memory]
//
// The section scripts run the BUILT packages (dist/, what users run): the runner first runs
// `npx turbo run build` for the packages the benches import (turbo rebuilds what is missing or stale, and
// replays its cache otherwise). --source runs them on the TypeScript sources instead
// (--conditions=@inboxkit/source), without building.
//
// Sections run one after another, each in its own process with a time limit: the core bench of
// packages/core/bench (inbox vs bare transaction, duplicates, batch, naive dedupe), the floor of a first
// delivery step by step (packages/core/bench/sql-floor.ts), Node CPU per delivery, the pgbench commit ceiling,
// claim latency at 10k and 10M rows, expiring a day by dropping its partition vs deleting it (bench/partition-drop.ts), the Redis fast path in a duplicate storm (packages/core/bench/fast-path-bench.ts), the transports' own bench scripts (packages/<transport>/bench), and the
// consumer's memory over a long run. The full run writes docs/benchmarks.md; --quick writes
// bench-results/benchmarks-quick.md unless --out says otherwise. Ratios measured in the same run are the
// headline: this machine is shared and noisy, absolute figures are not comparable across runs.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';

import pg from 'pg';
import * as prettier from 'prettier';

import { exclusiveOrSharedLockHolder } from '../test/torture/transports/rabbitmq-broker-lock.js';
import type { RateRow, RatioLine } from './parse-output.js';
import { crossDaySection, type CrossDayResult } from './cross-day-report.js';
import { partitionSection, type PartitionResult } from './partition-report.js';
import { rateRows, ratioLines } from './parse-output.js';
import type { ChildRun } from './run-child.js';
import { killCurrentScript, runScript } from './run-child.js';
import { REPO_ROOT, setting } from './settings.js';

const SECTIONS = [
  'core',
  'floor',
  'cpu',
  'pgbench',
  'capacity',
  'claim',
  'partitions',
  'crossday',
  'fastpath',
  'httpfastpath',
  'kafka',
  'rabbitmq',
  'sqs',
  'nats',
  'outbox',
  'http',
  'data',
  'memory',
] as const;
type Section = (typeof SECTIONS)[number];

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    // The TypeScript sources (--conditions=@inboxkit/source) instead of the built packages.
    source: { type: 'boolean', default: false },
    out: { type: 'string' },
    only: { type: 'string' },
    // Write the document again from a saved run (bench-results/last-full-run.json) instead of running.
    render: { type: 'string' },
  },
});
const quick = values.quick;
const only = new Set((values.only?.split(',') ?? SECTIONS) as Section[]);
for (const s of only)
  if (!SECTIONS.includes(s)) throw new Error(`--only takes ${SECTIONS.join(',')}, got ${s}`);
const out = values.out ?? (quick ? 'bench-results/benchmarks-quick.md' : 'docs/benchmarks.md');
const source = values.source;
const flags = [
  ...(source ? ['--source'] : []),
  ...(values.out ? ['--out', values.out] : []),
  ...(values.only ? ['--only', values.only] : []),
];
const command = `npm run ${quick ? 'bench:quick' : 'bench'}${flags.length > 0 ? ` -- ${flags.join(' ')}` : ''}`;
const startedNow = new Date();
const log = (line: string): void =>
  void process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

/** What each section runs, full and quick. */
const PLAN: Record<Section, { script: string; args: string[]; timeout: number; nodeArgs?: string[] }> = {
  core: {
    script: 'packages/core/bench/core-bench.ts',
    args: quick ? ['--quick', '--rounds', '3'] : ['--deliveries', '20000', '--rounds', '5'],
    timeout: quick ? 240 : 1800,
  },
  floor: {
    script: 'packages/core/bench/sql-floor.ts',
    args: quick ? ['--deliveries', '800', '--rounds', '4'] : ['--deliveries', '2000', '--rounds', '10'],
    timeout: quick ? 120 : 360,
  },
  cpu: {
    script: 'bench/core-cpu.ts',
    args: quick ? ['--deliveries', '1500', '--rounds', '1'] : ['--deliveries', '5000', '--rounds', '2'],
    timeout: quick ? 90 : 240,
  },
  pgbench: {
    script: 'bench/pgbench-ceiling.ts',
    args: quick
      ? ['--clients', '16', '--seconds', '5', '--runs', '1']
      : ['--clients', '16', '--seconds', '15', '--runs', '2'],
    timeout: quick ? 60 : 120,
  },
  capacity: {
    script: 'bench/primary-capacity.ts',
    args: quick ? ['--quick'] : [],
    timeout: quick ? 90 : 420,
  },
  claim: {
    script: 'bench/claim-latency.ts',
    args: quick
      ? ['--small', '10000', '--large', '200000', '--samples', '300']
      : ['--small', '10000', '--large', '10000000', '--samples', '2000', '--fill-budget', '300'],
    timeout: quick ? 120 : 720,
  },
  partitions: {
    script: 'bench/partition-drop.ts',
    args: quick
      ? ['--rows', '200000', '--rounds', '2', '--window', '1.5']
      : ['--rows', '10000000', '--rounds', '3', '--window', '10'],
    timeout: quick ? 150 : 3600,
  },
  crossday: {
    script: 'bench/partition-cross-day.ts',
    args: quick
      ? ['--rows', '110000', '--rounds', '1', '--seconds', '3', '--server-claims', '1000']
      : ['--rows', '1100000', '--rounds', '3', '--seconds', '10', '--server-claims', '3000'],
    timeout: quick ? 180 : 900,
  },
  fastpath: {
    script: 'packages/core/bench/fast-path-bench.ts',
    args: quick ? ['--deliveries', '1500', '--rounds', '2'] : ['--deliveries', '6000', '--rounds', '6'],
    timeout: quick ? 180 : 600,
  },
  httpfastpath: {
    script: 'packages/http/bench/http-fast-path-bench.ts',
    args: quick ? ['--requests', '900', '--rounds', '1'] : ['--requests', '4000', '--rounds', '5'],
    timeout: quick ? 180 : 600,
  },
  kafka: {
    script: 'packages/kafka/bench/kafka-bench.ts',
    args: quick ? ['--quick', '--messages', '1500'] : ['--messages', '8000', '--rounds', '1'],
    timeout: quick ? 180 : 420,
  },
  rabbitmq: {
    script: 'packages/rabbitmq/bench/rabbitmq-bench.ts',
    args: quick ? ['--quick', '--messages', '1500'] : ['--messages', '8000', '--rounds', '1'],
    timeout: quick ? 180 : 420,
  },
  sqs: {
    script: 'packages/sqs/bench/sqs-bench.ts',
    args: quick ? ['--quick', '--messages', '1500'] : ['--messages', '4000', '--rounds', '1'],
    timeout: quick ? 180 : 420,
  },
  nats: {
    script: 'packages/nats/bench/nats-bench.ts',
    args: quick ? ['--quick', '--messages', '1500'] : ['--messages', '8000', '--rounds', '1'],
    timeout: quick ? 180 : 420,
  },
  outbox: {
    script: 'packages/outbox/bench/outbox-bench.ts',
    args: quick ? ['--quick'] : [],
    timeout: quick ? 120 : 360,
  },
  http: {
    script: 'packages/http/bench/http-bench.ts',
    args: quick ? ['--quick'] : [],
    timeout: quick ? 120 : 300,
  },
  data: {
    script: 'packages/data/bench/data-layers-bench.ts',
    args: quick ? ['--quick'] : [],
    timeout: quick ? 300 : 900,
  },
  memory: {
    script: 'bench/memory-run.ts',
    args: quick ? ['--messages', '400000'] : ['--messages', '3000000'],
    nodeArgs: ['--expose-gc'],
    timeout: quick ? 120 : 360,
  },
};

// ── the machine ──────────────────────────────────────────────────────────────────────────────────────────────

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', timeout: 10_000 }).trim();
  } catch {
    return '?';
  }
}

async function machine(): Promise<Record<string, string>> {
  let postgres = '?';
  try {
    const client = new pg.Client({ connectionString: setting('DATABASE_URL') });
    await client.connect();
    const r = await client.query<{ v: string; sb: string; sc: string }>(
      "SELECT current_setting('server_version') AS v, current_setting('shared_buffers') AS sb, current_setting('synchronous_commit') AS sc",
    );
    postgres = `${r.rows[0]!.v} (shared_buffers ${r.rows[0]!.sb}, synchronous_commit ${r.rows[0]!.sc})`;
    await client.end();
  } catch {
    // reported as '?'
  }
  return {
    nproc: sh('nproc', []),
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    cpu: cpus()[0]?.model ?? '?',
    kernel: sh('uname', ['-sr']),
    node: process.version,
    postgres,
    'load average at start (1/5/15 min)': loadavg()
      .map((l) => l.toFixed(1))
      .join(' / '),
  };
}

// ── formatting ───────────────────────────────────────────────────────────────────────────────────────────────

// Figures read back from JSON may be null (NaN does not survive JSON).
const fmt = (n: number | null | undefined, digits = 0): string =>
  n === undefined || n === null || Number.isNaN(n)
    ? '—'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const x = (n: number | null | undefined): string =>
  n === undefined || n === null || Number.isNaN(n) ? '—' : `${n.toFixed(2)}×`;

interface Target {
  readonly figure: string;
  readonly measured: string;
  readonly target: string;
  readonly ok: boolean | undefined;
}

function status(t: Target): string {
  return t.ok === undefined ? 'n/a' : t.ok ? 'met' : '**missed**';
}

function rawBlock(title: string, run: ChildRun | undefined): string {
  if (run === undefined) return '';
  const how = run.missing
    ? 'missing'
    : run.timedOut
      ? `timed out after ${fmt(run.seconds)} s`
      : `exit ${run.code}, ${fmt(run.seconds)} s`;
  return `<details><summary>${title}: <code>${run.command}</code> (${how})</summary>\n\n\`\`\`\n${run.output}\n\`\`\`\n\n</details>\n`;
}

function rateTable(rows: readonly RateRow[]): string {
  if (rows.length === 0) return '_(no figures could be read from the output; see the raw output below)_\n';
  const lines = ['| variant | msg/s | p50 ms | p99 ms |', '|---|---:|---:|---:|'];
  for (const r of rows)
    lines.push(
      `| ${r.label.replace(/\s+/g, ' ')} | ${fmt(r.perSecond)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} |`,
    );
  return `${lines.join('\n')}\n`;
}

function ratioTargets(transport: string, ratios: readonly RatioLine[]): Target[] {
  return ratios
    .filter((r) => r.target !== undefined)
    .map((r) => ({
      figure: `${transport}: ${r.label.replace(/\s+/g, ' ')}`,
      measured: x(r.value),
      target: `≥ ${r.target}×`,
      ok: r.value >= r.target!,
    }));
}

// ── the run ──────────────────────────────────────────────────────────────────────────────────────────────────

/** What a run leaves behind, so that the document can be written again (`--render`) without re-running. */
interface SavedRun {
  readonly command: string;
  readonly started: string;
  readonly finished: string;
  readonly quick: boolean;
  readonly info: Record<string, string>;
  readonly runs: Partial<Record<Section, ChildRun>>;
}

/** The packages whose dist/ the section scripts import (by name, or through a package they import). */
const BUILT_PACKAGES = ['core', 'data', 'http', 'outbox', 'kafka', 'rabbitmq', 'sqs'];

/** Builds what the benches import; turbo skips what is up to date (its cache restores dist/ if it is missing). */
function buildPackages(): void {
  const filters = BUILT_PACKAGES.map((p) => `--filter=@inboxkit/${p}`);
  log(`building the packages the benches run: npx turbo run build ${filters.join(' ')}`);
  execFileSync('npx', ['turbo', 'run', 'build', ...filters, '--output-logs=errors-only'], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

async function runSections(): Promise<SavedRun> {
  const info = await machine();
  info['packages measured'] = source
    ? 'TypeScript sources (--source: --conditions=@inboxkit/source)'
    : 'built (dist/, as users run them)';
  if (!source) buildPackages();
  log(`${quick ? 'quick' : 'full'} run → ${out}; sections: ${[...only].join(', ')}`);
  const runs: Partial<Record<Section, ChildRun>> = {};
  for (const section of SECTIONS) {
    if (!only.has(section)) continue;
    const p = PLAN[section];
    log(`${section}: ${p.script} ${p.args.join(' ')} (limit ${p.timeout} s)`);
    // The RabbitMQ tests restart their broker under an exclusive lock; hold the shared one meanwhile.
    const release = section === 'rabbitmq' ? await exclusiveOrSharedLockHolder('shared') : undefined;
    try {
      runs[section] = await runScript(p.script, p.args, {
        timeoutSeconds: p.timeout,
        ...(p.nodeArgs ? { nodeArgs: p.nodeArgs } : {}),
        echo: true,
        source,
      });
    } finally {
      release?.();
    }
    const r = runs[section];
    log(
      `${section}: ${r.missing ? 'script missing' : r.timedOut ? 'TIMED OUT' : `exit ${r.code}`} after ${fmt(r.seconds)} s`,
    );
  }
  const saved: SavedRun = {
    command,
    started: startedNow.toISOString(),
    finished: new Date().toISOString(),
    quick,
    info,
    runs,
  };
  const file = join(REPO_ROOT, `bench-results/last-${quick ? 'quick' : 'full'}-run.json`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(saved, null, 1));
  log(`raw results saved to ${file} (re-render with --render)`);
  return saved;
}

// Interrupted: take the running section down too.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killCurrentScript();
    process.exit(130);
  });
}

const saved: SavedRun =
  values.render !== undefined
    ? (JSON.parse(readFileSync(values.render, 'utf8')) as SavedRun)
    : await runSections();
const { info, runs } = saved;
const finished = new Date(saved.finished);
const started = new Date(saved.started);

const targets: Target[] = [];
const md: string[] = [];

// Core.
const core = runs.core;
let inboxRate: number | undefined;
let firstRate: number | undefined;
const coreResult = core?.result as
  | {
      deliveries: number;
      rounds: number;
      rates: Record<string, number[]>;
      ratios: Record<string, { rounds: number[]; target?: number }>;
      doubles: number;
      naiveDoubles: number;
      pairs: number;
    }
  | undefined;
if (core !== undefined) {
  const median = (xs: readonly number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const spreadOf = (xs: readonly number[]): string =>
    `${x(median(xs))} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
  const rateOf = (name: string): number | undefined => {
    const r = coreResult?.rates[name];
    return r === undefined ? undefined : median(r);
  };
  inboxRate = rateOf('handle(), 30% duplicates in flight');
  firstRate = rateOf('handle(), first deliveries only');
  for (const [name, r] of Object.entries(coreResult?.ratios ?? {})) {
    targets.push({
      figure: `core: ${name} (median, min–max of ${r.rounds.length} rounds)`,
      measured: spreadOf(r.rounds),
      target: r.target === undefined ? '(reported)' : `≥ ${r.target}×`,
      ok: r.target === undefined ? undefined : median(r.rounds) >= r.target,
    });
  }
  if (coreResult !== undefined) {
    targets.push({
      figure: 'core: double effects under concurrent duplicates (naive select-then-insert vs inboxkit)',
      measured: `naive ${fmt(coreResult.naiveDoubles)} of ${fmt(coreResult.pairs)} ids; inboxkit ${fmt(coreResult.doubles)}`,
      target: 'inboxkit 0',
      ok: coreResult.doubles === 0,
    });
  }
  md.push(
    '## Core: the inbox on Postgres',
    '',
    'Concurrency 16, one pool, a one-row effect (the core bench of `packages/core/bench/core-bench.ts`): the scenarios alternate within each round, each ratio is taken within a round, and min–median–max are over the rounds. ' +
      '“bare” is the same transaction without the inbox (BEGIN; INSERT effect; COMMIT on node-postgres); the “least-row raw inbox” is the hand-written raw-SQL inbox that sends the least row the features need (consumer, id, fingerprint, expiry) with BEGIN. Duplicates “in flight” are dispatched right after their original, so both run at once; “spaced out” ones repeat an id committed 64–2,000 deliveries earlier.',
    '',
    core.output
      .split('\n')
      .filter((l) => l.startsWith('|'))
      .join('\n'),
    '',
    ...core.output
      .split('\n')
      .filter((l) => /\(min–median–max|double effects|concurrent duplicates/i.test(l) && !l.startsWith('|'))
      .map((l) => `- ${l.trim()}`),
    '',
  );
}

// The floor of a first delivery, step by step.
const floor = runs.floor?.result as
  | {
      deliveries: number;
      rounds: number;
      variants: Record<
        string,
        { medianRatio: number; medianPerSecond: number; medianCpuUs?: number; ratios: number[] }
      >;
    }
  | undefined;
const FLOOR_STEPS: Record<string, string> = {
  'bare pg': 'BEGIN; the one-row effect; COMMIT on node-postgres, no dedupe',
  'narrow claim': '+ a two-column claim row sent with BEGIN: the design brief’s raw-SQL floor',
  'minimal row': '+ the payload fingerprint and the expiry in that row: the least the issue’s features need',
  'v1 row':
    'version 1’s inbox row instead (22 columns, two indexes; a literal insert): what the lean row replaced',
  'inbox row':
    'the inbox table’s lean row instead (+ status, attempts, changed_at; its BRIN index; a literal insert)',
  'claim statement':
    'the store’s own claim (its claim function’s call), sent by hand: all of the SQL, none of the JavaScript',
  '+ Kysely effect':
    'the same, the effect sent as the handler sends it (a Kysely `sql` template on that connection)',
  'handle()': 'idempotentConsumer().handle() with an ordinary handler doing that insert',
};
if (runs.floor !== undefined) {
  md.push('## The floor of a first delivery', '');
  if (floor) {
    md.push(
      `Throughput of first deliveries (new ids, concurrency 16, one pool), each step adding one thing to the step above, as a ratio to the bare transaction in the same round (\`packages/core/bench/sql-floor.ts\`, ${fmt(floor.deliveries)} deliveries per step and round, ${fmt(floor.rounds)} rounds, the steps alternating within each round; the median of the rounds is the figure). ` +
        'The gap between two steps is what the lower one adds, whoever’s code it is.',
      '',
      '| step | what it is | median ratio | median deliveries/s | median Node CPU per delivery | ratio in each round |',
      '|---|---|---:|---:|---:|---|',
      ...Object.entries(floor.variants).map(
        ([name, v]) =>
          `| ${name} | ${FLOOR_STEPS[name] ?? ''} | ${x(v.medianRatio)} | ${fmt(v.medianPerSecond)} | ${fmt(v.medianCpuUs)} µs | ${v.ratios.map((r) => r.toFixed(2)).join(' ')} |`,
      ),
      '',
    );
    const narrow = floor.variants['narrow claim']?.medianRatio;
    const handle = floor.variants['handle()']?.medianRatio;
    if (narrow !== undefined)
      targets.push({
        figure:
          'core: the design brief’s raw-SQL floor (a two-column claim row, no library code) / bare transaction',
        measured: x(narrow),
        target: '(reported; the 0.90× target needs it above 0.90×)',
        ok: undefined,
      });
    if (handle !== undefined)
      targets.push({
        figure: 'core: handle() / bare transaction, new ids only (same rounds as the floor above)',
        measured: x(handle),
        target: '(reported)',
        ok: undefined,
      });
  } else {
    md.push('_No figures: see the raw output._', '');
  }
}

// Node CPU per delivery.
const cpu = runs.cpu?.result as
  | {
      deliveries: number;
      variants: Record<string, { cpuUs: number; pgUs?: number; otherUs?: number; perSecond: number }>;
    }
  | undefined;
if (runs.cpu !== undefined) {
  md.push('## Where the consumer’s CPU goes', '');
  if (cpu) {
    const bare = cpu.variants['bare pg']?.cpuUs;
    const bareOther = cpu.variants['bare pg']?.otherUs;
    const barePg = cpu.variants['bare pg']?.pgUs;
    const ratio = (v: number | undefined, base: number | undefined): string =>
      v !== undefined && base !== undefined && Number.isFinite(v) && base > 0 ? x(v / base) : '—';
    md.push(
      `Node CPU time (user + system) per delivery, concurrency 16, same pool and one-row effect (\`bench/core-cpu.ts\`, ${fmt(cpu.deliveries)} deliveries per variant, lowest of the rounds). ` +
        'On two cores shared by Node and Postgres, every microsecond Node spends is one Postgres cannot: this is steadier than throughput and shows how much of a gap is the JS path itself. ' +
        '“Its Postgres backends” is the CPU time of the pool’s own backend processes per delivery (/proc/<pid>/stat), meaningful even on a busy machine; ' +
        '“rest of the machine” is all other busy CPU time per delivery (/proc/stat minus Node): Postgres’ share when the machine is otherwise quiet (load at start in the table above), anyone’s when it is not.',
      '',
      '| path | Node CPU per delivery | × bare pg | its Postgres backends per delivery | × bare pg | rest of the machine per delivery | × bare pg | deliveries/s (same run) |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      ...Object.entries(cpu.variants).map(
        ([name, v]) =>
          `| ${name} | ${fmt(v.cpuUs)} µs | ${ratio(v.cpuUs, bare)} | ${fmt(v.pgUs)} µs | ${ratio(v.pgUs, barePg)} | ${fmt(v.otherUs)} µs | ${ratio(v.otherUs, bareOther)} | ${fmt(v.perSecond)} |`,
      ),
      '',
    );
  } else {
    md.push('_No figures: see the raw output._', '');
  }
}

// pgbench.
const pgb = runs.pgbench?.result as { clients: number; best: number; runs: number[] } | undefined;
if (runs.pgbench !== undefined) {
  md.push(
    '## Postgres commit ceiling (pgbench)',
    '',
    pgb
      ? `pgbench, ${pgb.clients} clients, a one-row INSERT per transaction (autocommit, prepared): **${fmt(pgb.best)} tps** (best of ${pgb.runs.map((r) => fmt(r)).join(', ')}).`
      : '_pgbench gave no figure; see the raw output._',
    '',
  );
  if (pgb) {
    const lines = ['| inbox path | deliveries/s | fraction of the pgbench ceiling |', '|---|---:|---:|'];
    if (inboxRate !== undefined)
      lines.push(`| handle(), 30% duplicates | ${fmt(inboxRate)} | ${fmt((inboxRate / pgb.best) * 100)}% |`);
    if (firstRate !== undefined)
      lines.push(
        `| handle(), first deliveries only (one commit each, like pgbench) | ${fmt(firstRate)} | ${fmt((firstRate / pgb.best) * 100)}% |`,
      );
    if (lines.length > 2) md.push(lines.join('\n'), '');
    if (firstRate !== undefined) {
      targets.push({
        figure:
          'core: first deliveries as a fraction of the pgbench one-row-insert ceiling (same client count)',
        measured: `${fmt((firstRate / pgb.best) * 100)}%`,
        target: '(reported)',
        ok: undefined,
      });
    }
  }
}

// Capacity of one primary: the script prints its own Markdown tables and one `- phase: limit …` line per phase.
if (runs.capacity !== undefined && !runs.capacity.missing) {
  const lines = runs.capacity.output.split('\n');
  md.push(
    '## Capacity of one primary',
    '',
    `Messages per second per core of CPU actually spent (Node + the pool’s Postgres backends + the server’s own processes, from /proc), for \`handle()\` and \`handleBatch()\` on first deliveries with a one-row effect, with WAL per message (pg_stat_wal, and this run’s own records through pg_walinspect), where the pool’s backends waited (pg_stat_activity sampled) and the limit each phase hit (\`${PLAN.capacity.script}\`; what it means: docs/operations.md, “Capacity of one primary”).`,
    '',
    // Everything but the progress lines (`[capacity hh:mm:ss] …`), blank lines kept: they separate the tables.
    lines
      .filter((l) => !l.startsWith('[capacity '))
      .join('\n')
      .trim(),
    '',
  );
  if (runs.capacity.timedOut || runs.capacity.code !== 0)
    md.push(
      `_The script ${runs.capacity.timedOut ? 'timed out' : `exited with ${runs.capacity.code}`}: figures may be partial._`,
      '',
    );
}

// Claim latency.
interface Latency {
  p50: number;
  p99: number;
  mean: number;
}
interface ClaimSide {
  rows: number;
  first: Latency;
  duplicate: Latency;
  tableMb: number;
  indexMb: number;
}
const claim = runs.claim?.result as
  { small?: ClaimSide; large?: ClaimSide; note: string; samples: number; fillSeconds?: number } | undefined;
if (runs.claim !== undefined) {
  md.push('## Claim latency as the inbox grows', '');
  if (claim?.small && claim.large) {
    const s = claim.small;
    const l = claim.large;
    md.push(
      `One delivery at a time through \`handle()\` (no queueing in the figures), ${fmt(claim.samples)} samples per kind and size, alternating between a table of ${fmt(s.rows)} completed rows and one of ${fmt(l.rows)} so both see the same noise. ` +
        `“first”: a new id (claim + one-row effect + commit). “duplicate”: an id already completed, picked at random (the claim's single round trip).` +
        (claim.note ? ` **Note:** ${claim.note}.` : ''),
      '',
      '| rows in the inbox | table + indexes | first p50 | first p99 | duplicate p50 | duplicate p99 |',
      '|---:|---:|---:|---:|---:|---:|',
      ...[s, l].map(
        (c) =>
          `| ${fmt(c.rows)} | ${fmt(c.tableMb + c.indexMb)} MB | ${fmt(c.first.p50, 2)} ms | ${fmt(c.first.p99, 2)} ms | ${fmt(c.duplicate.p50, 2)} ms | ${fmt(c.duplicate.p99, 2)} ms |`,
      ),
      '',
    );
    const label =
      l.rows >= 10_000_000
        ? '10M'
        : `${fmt(l.rows)} (${claim.note ? '10M did not fit the time budget' : 'quick run: 10M skipped'})`;
    targets.push(
      {
        figure: `claim latency: first-delivery p99 at ${label} rows / at ${fmt(s.rows)}`,
        measured: x(l.first.p99 / s.first.p99),
        target: '≤ 1.5×',
        ok: l.first.p99 / s.first.p99 <= 1.5,
      },
      {
        figure: `claim latency: duplicate p99 at ${label} rows / at ${fmt(s.rows)}`,
        measured: x(l.duplicate.p99 / s.duplicate.p99),
        target: '≤ 1.5×',
        ok: l.duplicate.p99 / s.duplicate.p99 <= 1.5,
      },
    );
  } else {
    md.push('_No figures: see the raw output._', '');
  }
}

// Expiring a day: dropping a partition vs deleting with prune.
if (runs.partitions !== undefined) {
  const result = runs.partitions.result as PartitionResult | undefined;
  if (result) {
    const section = partitionSection(result, PLAN.partitions.script);
    md.push(...section.md);
    targets.push(...section.targets);
  } else {
    md.push(
      '## Partitioned inbox: dropping a day vs deleting it',
      '',
      '_No figures: see the raw output._',
      '',
    );
  }
}

// What the partitioned inbox's cross-day check costs a claim.
if (runs.crossday !== undefined) {
  const result = runs.crossday.result as CrossDayResult | undefined;
  md.push(
    ...(result
      ? crossDaySection(result, PLAN.crossday.script)
      : ['## Partitioned inbox: the cross-day check', '', '_No figures: see the raw output._', '']),
  );
}

// The Redis fast path.
interface RatioSpread {
  median: number;
  min: number;
  max: number;
  ratios: number[];
}
/** A ratio's median with its min–max, as the fast-path tables print it. */
const spread = (r: RatioSpread): string => `${x(r.median)} (${r.min.toFixed(2)}–${r.max.toFixed(2)})`;
/** The lower median of some rates (a fast-path table's requests/s column). */
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const fastPath = runs.fastpath?.result as
  | {
      deliveries: number;
      rounds: number;
      concurrency: number;
      duplicateShare: number;
      rates: Record<string, number[]>;
      storm: RatioSpread;
      first: RatioSpread;
      ceiling?: RatioSpread;
      appliedTwice: number;
      lookups?: Record<string, number>;
    }
  | undefined;
if (runs.fastpath !== undefined) {
  md.push('## Redis fast path in a duplicate storm', '');
  if (fastPath) {
    md.push(
      `\`idempotentConsumer().handle()\` on the Postgres inbox with and without \`redisFastPath()\` on Redis (\`packages/core/bench/fast-path-bench.ts\`), concurrency ${fastPath.concurrency}, a one-row effect. ` +
        `“storm”: ${fmt(fastPath.deliveries)} deliveries, ${fmt(fastPath.duplicateShare * 100)}% duplicates of completed ids; “first”: ${fmt(fastPath.deliveries / 2)} new ids. ` +
        `${fmt(fastPath.rounds)} rounds, the two variants taking turns in blocks within each round; the figure is the median of the rounds’ ratios, with their min–max.`,
      '',
      '| workload | fast path / without (median, min–max) | deliveries/s with (median) | deliveries/s without (median) |',
      '|---|---:|---:|---:|',
      `| storm (90% duplicates) | ${spread(fastPath.storm)} | ${fmt(med(fastPath.rates['storm, fast path'] ?? []))} | ${fmt(med(fastPath.rates['storm, no fast path'] ?? []))} |`,
      `| first deliveries only | ${spread(fastPath.first)} | ${fmt(med(fastPath.rates['first, fast path'] ?? []))} | ${fmt(med(fastPath.rates['first, no fast path'] ?? []))} |`,
      ...(fastPath.ceiling
        ? [
            `| duplicates only (the storm's ceiling: 0.1·first + 0.9·dup, per delivery) | ${spread(fastPath.ceiling)} | ${fmt(med(fastPath.rates['dup, fast path'] ?? []))} | ${fmt(med(fastPath.rates['dup, no fast path'] ?? []))} |`,
          ]
        : []),
      '',
      `Effects applied twice over the whole run: ${fmt(fastPath.appliedTwice)}.` +
        (fastPath.lookups
          ? ` Fast-path lookups by result: ${Object.entries(fastPath.lookups)
              .map(([r, n]) => `${r} ${fmt(n)}`)
              .join(', ')}.`
          : ''),
      '',
    );
    targets.push(
      {
        figure: 'fast path: duplicate storm (90% duplicates, c=16), with / without Redis',
        measured: spread(fastPath.storm),
        target: '≥ 3×',
        ok: fastPath.storm.median >= 3,
      },
      {
        figure: 'fast path: first deliveries only, with / without Redis (the lookup’s tax)',
        measured: spread(fastPath.first),
        target: '≥ 0.95×',
        ok: fastPath.first.median >= 0.95,
      },
    );
  } else {
    md.push('_No figures: see the raw output._', '');
  }
}

// The Redis fast path in front of the HTTP Idempotency-Key middleware.
const httpFastPath = runs.httpfastpath?.result as
  | {
      requests: number;
      rounds: number;
      concurrency: number;
      duplicateShare: number;
      rates: Record<string, number[]>;
      storm: RatioSpread;
      first: RatioSpread;
      ceiling: RatioSpread;
      appliedTwice: number;
    }
  | undefined;
if (runs.httpfastpath !== undefined) {
  md.push('## Redis fast path in front of the HTTP Idempotency-Key middleware', '');
  if (httpFastPath) {
    md.push(
      `\`idempotencyKeys()\` with and without \`fastPath: redisFastPath()\` (\`packages/http/bench/http-fast-path-bench.ts\`): a node:http server in its own process, keep-alive HTTP at concurrency ${httpFastPath.concurrency}, a one-row effect in the handler's transaction. ` +
        `“storm”: ${fmt(httpFastPath.requests)} requests, ${fmt(httpFastPath.duplicateShare * 100)}% retries of completed keys; “first”: ${fmt(httpFastPath.requests / 2)} new keys. ` +
        `${fmt(httpFastPath.rounds)} rounds, the two variants taking turns in blocks within each round; the figure is the median of the rounds’ ratios, with their min–max.`,
      '',
      '| workload | fast path / without (median, min–max) | requests/s with (median) | requests/s without (median) |',
      '|---|---:|---:|---:|',
      `| storm (90% retries) | ${spread(httpFastPath.storm)} | ${fmt(med(httpFastPath.rates['storm, fast path'] ?? []))} | ${fmt(med(httpFastPath.rates['storm, no fast path'] ?? []))} |`,
      `| first requests only | ${spread(httpFastPath.first)} | ${fmt(med(httpFastPath.rates['first, fast path'] ?? []))} | ${fmt(med(httpFastPath.rates['first, no fast path'] ?? []))} |`,
      `| retries only (the storm's ceiling: 0.1·first + 0.9·retry, per request) | ${spread(httpFastPath.ceiling)} | ${fmt(med(httpFastPath.rates['dup, fast path'] ?? []))} | ${fmt(med(httpFastPath.rates['dup, no fast path'] ?? []))} |`,
      '',
      `Handlers run twice over the whole run: ${fmt(httpFastPath.appliedTwice)}.`,
      '',
    );
    targets.push(
      {
        figure: 'HTTP fast path: retry storm (90% retries, c=16), with / without Redis',
        measured: spread(httpFastPath.storm),
        target: '≥ 3×',
        ok: httpFastPath.storm.median >= 3,
      },
      {
        figure: 'HTTP fast path: first requests only, with / without Redis (the lookup’s tax)',
        measured: spread(httpFastPath.first),
        target: '≥ 0.95×',
        ok: httpFastPath.first.median >= 0.95,
      },
    );
  } else {
    md.push('_No figures: see the raw output._', '');
  }
}

// Transports.
const TRANSPORT_NOTES: Record<string, string> = {
  kafka:
    'kafkaConsumer (message and batch mode) vs plain kafkajs `eachMessage` / `eachBatch` consumers doing the same insert, same topic partitions and concurrency.',
  rabbitmq: 'rabbitmqConsumer vs a plain amqplib consumer doing the same insert at the same prefetch.',
  sqs: 'sqsConsumer vs a plain receive / insert / delete consumer at the same concurrency.',
  nats: 'natsConsumer vs a plain JetStream pull consumer (consume, insert, ackAck) at the same concurrency, with the insert in the handler and as a statementHandler (sent with the claim).',
  outbox:
    'The outbox relay (rows committed by `enqueue`, published in batches by `startOutboxRelay`) vs publishing the same messages directly from the handler, per broker. Latency is from the enqueue’s commit to the broker’s confirm.',
  http: 'The same endpoint (a one-row Postgres write) with and without the Idempotency-Key middleware, over loopback HTTP: first requests (a new key each) and replays (a completed key again).',
};
const HEADINGS: Record<string, string> = {
  kafka: 'Kafka',
  rabbitmq: 'RabbitMQ',
  sqs: 'SQS (ElasticMQ)',
  nats: 'NATS JetStream',
  outbox: 'Outbox relay',
  http: 'HTTP Idempotency-Key',
};
for (const transport of ['kafka', 'rabbitmq', 'sqs', 'nats', 'outbox', 'http'] as const) {
  const run = runs[transport];
  if (run === undefined) continue;
  const broker =
    transport === 'kafka' || transport === 'rabbitmq' || transport === 'sqs' || transport === 'nats';
  md.push(
    `## ${HEADINGS[transport]}`,
    '',
    `${TRANSPORT_NOTES[transport]} Figures from \`${PLAN[transport].script}\`${broker ? '; end-to-end latency is from the send to the committed effect, at a steady rate below capacity' : ''}.`,
    '',
  );
  if (run.missing) {
    md.push(`_\`${PLAN[transport].script}\` is not in this checkout: no figures._`, '');
    continue;
  }
  md.push(rateTable(rateRows(run.output)));
  const ratios = ratioLines(run.output);
  if (ratios.length > 0)
    md.push(
      ...ratios.map(
        (r) => `- ${r.label}: **${x(r.value)}**${r.target !== undefined ? ` (target ≥ ${r.target}×)` : ''}`,
      ),
      '',
    );
  targets.push(...ratioTargets(transport, ratios));
  if (run.timedOut || run.code !== 0)
    md.push(
      `_The script ${run.timedOut ? 'timed out' : `exited with ${run.code}`}: figures may be partial._`,
      '',
    );
}

// Data layers: the script prints its own Markdown table and one `ratio` line per library.
{
  const run = runs.data;
  if (run !== undefined && !run.missing) {
    md.push(
      '## Data layers (@inboxkit/data)',
      '',
      `Each library's first delivery through inboxkit vs the same one-row effect through the same library without inboxkit (its own transaction: the target's reference), and vs that transaction with a hand-written inbox in it (the inbox's hot row as a plain INSERT … ON CONFLICT DO NOTHING through the library: the least any correct inbox adds), alternating rounds, concurrency 16. Figures from \`${PLAN.data.script}\`; where the time goes: docs/data-layers.md.`,
      '',
      ...run.output.split('\n').filter((line) => line.startsWith('|')),
      '',
    );
    const ratios = ratioLines(run.output);
    targets.push(...ratioTargets('data', ratios));
    if (run.timedOut || run.code !== 0)
      md.push(
        `_The script ${run.timedOut ? 'timed out' : `exited with ${run.code}`}: figures may be partial._`,
        '',
      );
  }
}

// Memory.
const mem = runs.memory?.result as
  | {
      messages: number;
      seconds: number;
      perSecond: number;
      rssStartMb: number;
      rssEndMb: number;
      rssMaxMb: number;
      rssSlopeMbPerMillion: number;
      rssFirstHalfMaxMb?: number;
      rssSecondHalfMaxMb?: number;
      heapAfterGcStartMb: number;
      heapAfterGcEndMb: number;
      heapAfterGcSlopeMbPerMillion: number;
      warmUp: number;
      storeRowsAtEnd?: number;
      series: [number, number][];
    }
  | undefined;
if (runs.memory !== undefined) {
  md.push('## Consumer memory over a long run', '');
  if (mem) {
    md.push(
      `${fmt(mem.messages)} deliveries (30% duplicates) through \`idempotentConsumer().handle()\` at concurrency 16 in one process (\`bench/memory-run.ts\`), ${fmt(mem.perSecond)} deliveries/s, with core's in-memory store on a one-second dedupe window pruned twice a second, so the store stays bounded and what could grow is the consumer path. ` +
        `RSS sampled every 500 ms; start is after ${fmt(mem.warmUp)} warm-up deliveries. RSS saws with the garbage collector and with the store's few tens of thousands of live rows, so its slope over a short run is mostly noise; ` +
        'a leak shows as RSS peaks rising from the first half of the run to the second, and as live heap growing between checkpoints (heap after a full GC, taken with the store emptied of completed rows just before).',
      '',
      '| RSS start | RSS end | RSS max (first half → second half) | RSS slope | heap after GC, first → last checkpoint | heap slope |',
      '|---:|---:|---:|---:|---:|---:|',
      `| ${fmt(mem.rssStartMb)} MB | ${fmt(mem.rssEndMb)} MB | ${fmt(mem.rssMaxMb)} MB (${fmt(mem.rssFirstHalfMaxMb)} → ${fmt(mem.rssSecondHalfMaxMb)}) | ${fmt(mem.rssSlopeMbPerMillion, 1)} MB per million | ${fmt(mem.heapAfterGcStartMb, 1)} → ${fmt(mem.heapAfterGcEndMb, 1)} MB | ${fmt(mem.heapAfterGcSlopeMbPerMillion, 1)} MB per million |`,
      '',
      `RSS by deliveries handled: ${mem.series.map(([n, mb]) => `${fmt(n / 1000)}k→${mb}`).join(', ')} (MB).`,
      '',
    );
    const peaksFlat =
      mem.rssFirstHalfMaxMb === undefined || mem.rssSecondHalfMaxMb === undefined
        ? undefined
        : mem.rssSecondHalfMaxMb <= mem.rssFirstHalfMaxMb * 1.15;
    targets.push({
      figure: `memory: over ${fmt(mem.messages / 1_000_000, 1)}M deliveries, RSS start → end (max, first half → second half); live heap slope`,
      measured: `${fmt(mem.rssStartMb)} → ${fmt(mem.rssEndMb)} MB (max ${fmt(mem.rssFirstHalfMaxMb)} → ${fmt(mem.rssSecondHalfMaxMb)} MB); heap ${fmt(mem.heapAfterGcSlopeMbPerMillion, 1)} MB/M`,
      target: 'flat (peaks within +15%, heap < 10 MB/M)',
      // A short (quick) run is all sawtooth: no verdict.
      ok:
        mem.messages < 1_000_000 || peaksFlat === undefined
          ? undefined
          : mem.heapAfterGcSlopeMbPerMillion < 10 && peaksFlat,
    });
  } else {
    md.push('_No figures: see the raw output._', '');
  }
}

// The document.
const analysisFile = join(REPO_ROOT, 'bench/analysis.md');
const analysis = !quick && existsSync(analysisFile) ? readFileSync(analysisFile, 'utf8').trim() : '';
const doc = [
  '# Benchmarks',
  '',
  `Generated by \`${saved.command}\` on ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC (${fmt((finished.getTime() - started.getTime()) / 60_000, 1)} minutes). ` +
    'Every figure on this page comes from that one run; the sections ran one after another on the machine below.',
  '',
  '> This machine is shared with other engineers’ test runs (see the load average at the start, below): absolute figures are noisy and not comparable across runs. ' +
    'The headline is each **ratio**, measured side by side in the same run (alternating where the script does). Re-run `npm run bench` on a quiet machine for cleaner absolutes.',
  '',
  `\`npm run bench\` (every section, about 10–15 minutes, writes this page) · \`npm run bench:quick\` (small sizes, 2–5 minutes, writes \`bench-results/benchmarks-quick.md\`; runs in CI) · \`--only ${SECTIONS.join(',')}\` · \`--render bench-results/last-full-run.json\` rewrites the page from the last run’s saved output. The runner is \`bench/bench.ts\`; each section is a script run in its own process with a time limit, and the raw output of each is at the end of this page.`,
  '',
  '## Machine',
  '',
  '| | |',
  '|---|---|',
  ...Object.entries(info).map(([k, v]) => `| ${k} | ${v} |`),
  '',
  '## Targets',
  '',
  '| figure | measured | target | status |',
  '|---|---:|---:|---|',
  ...targets.map((t) => `| ${t.figure} | ${t.measured} | ${t.target} | ${status(t)} |`),
  '',
  ...(analysis ? [analysis, ''] : []),
  ...md,
  '## Raw output of every section',
  '',
  ...SECTIONS.map((s) => rawBlock(s, runs[s])).filter((b) => b !== ''),
].join('\n');
mkdirSync(dirname(join(REPO_ROOT, out)), { recursive: true });
// Formatted like every other page of docs/ (prettier aligns the tables; code blocks stay as printed).
const target = join(REPO_ROOT, out);
const config = (await prettier.resolveConfig(target)) ?? {};
writeFileSync(target, await prettier.format(`${doc.trimEnd()}\n`, { ...config, parser: 'markdown' }));
log(`wrote ${out}`);
// The headline in the log too (CI keeps the log, not the file).
process.stdout.write(
  `\n${targets.map((t) => `${status(t).replace(/\*/g, '').padEnd(7)} ${t.figure}: ${t.measured} (target ${t.target})`).join('\n')}\n`,
);
const failed = SECTIONS.filter(
  (s) => runs[s] !== undefined && (runs[s].timedOut || (runs[s].code !== 0 && !runs[s].missing)),
);
if (failed.length > 0) log(`sections that failed or timed out: ${failed.join(', ')}`);
process.exit(failed.length > 0 ? 1 : 0);
