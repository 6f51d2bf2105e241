// The `partitions` section of the bench page, from bench/partition-drop.ts' result: dropping a day's partition
// against deleting a day's rows with the store's prune, per round and as medians (min–max) of the rounds.

interface Measured {
  readonly ms: number;
  readonly walBytes: number;
}

interface ClaimStats {
  readonly claims: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

interface Round {
  readonly alone: Measured;
  readonly vacuum?: Measured;
  readonly withClaims: Measured;
  readonly quiet: ClaimStats;
  readonly during: ClaimStats;
  readonly overlapping?: ClaimStats;
  readonly duringWindowMs: number;
  readonly sizeAfter: { readonly tableBytes: number; readonly indexBytes: number };
  readonly walPerQuietClaim: number;
}

interface Loaded {
  readonly loadSeconds: number;
  readonly tableBytes: number;
  readonly indexBytes: number;
  readonly tableBytesPerRow: number;
  readonly indexBytesPerRow: number;
}

/** What bench/partition-drop.ts prints after `BENCH_RESULT`. */
export interface PartitionResult {
  readonly rows: number;
  readonly days: number;
  readonly perDay: number;
  readonly concurrency: number;
  readonly windowSeconds: number;
  readonly batchSize: number;
  readonly loaded: { readonly partitioned: Loaded; readonly unpartitioned: Loaded };
  readonly rounds: { readonly partitioned: Round[]; readonly unpartitioned: Round[] };
  readonly loadAverage?: { readonly start: number; readonly end: number };
  readonly layoutSource?: string;
}

/** One line of the page's target table. */
export interface PartitionTarget {
  readonly figure: string;
  readonly measured: string;
  readonly target: string;
  readonly ok: boolean | undefined;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

const num = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';

/** `median (min–max)` of the rounds, formatted by `f`. */
function spread(xs: readonly number[], f: (n: number) => string): string {
  if (xs.length === 0) return '—';
  if (xs.length === 1) return f(xs[0]!);
  return `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
}

const ms = (n: number): string =>
  n < 100 ? `${num(n, 1)} ms` : n < 10_000 ? `${num(n)} ms` : `${num(n / 1_000, 1)} s`;
const bytes = (n: number): string =>
  n < 2 ** 20 ? `${num(n / 1024)} kB` : n < 2 ** 30 ? `${num(n / 2 ** 20)} MB` : `${num(n / 2 ** 30, 2)} GB`;
const percent = (n: number): string => `${num(n * 100, n < 0.01 ? 3 : 2)}%`;
const times = (n: number): string => `${num(n, 2)}×`;

/** Paired per-round ratios a[i] / b[i]. */
function ratios(a: readonly number[], b: readonly number[]): number[] {
  return a.slice(0, Math.min(a.length, b.length)).map((x, i) => x / b[i]!);
}

/** The section's Markdown and its targets. */
export function partitionSection(
  r: PartitionResult,
  script: string,
): { md: string[]; targets: PartitionTarget[] } {
  const drop = r.rounds.partitioned;
  const del = r.rounds.unpartitioned;
  const dropMs = drop.map((x) => x.alone.ms);
  const delMs = del.map((x) => x.alone.ms);
  const dropWal = drop.map((x) => x.alone.walBytes);
  const delWal = del.map((x) => x.alone.walBytes);
  const vacMs = del.map((x) => x.vacuum?.ms ?? Number.NaN);
  const vacWal = del.map((x) => x.vacuum?.walBytes ?? Number.NaN);
  const delVacMs = del.map((x, i) => x.alone.ms + vacMs[i]!);
  const delVacWal = del.map((x, i) => x.alone.walBytes + vacWal[i]!);
  const timeRatio = ratios(dropMs, delMs);
  const walRatio = ratios(dropWal, delWal);
  const p99Ratio = (side: readonly Round[]): number[] => side.map((x) => x.during.p99 / x.quiet.p99);
  const maxRatio = (side: readonly Round[]): number[] => side.map((x) => x.during.max / x.quiet.max);
  const rateRatio = (side: readonly Round[]): number[] =>
    side.map((x) => x.during.perSecond / x.quiet.perSecond);
  const lastP = drop.at(-1)?.sizeAfter;
  const lastU = del.at(-1)?.sizeAfter;
  const n = Math.min(drop.length, del.length);
  const dayRows = num(r.perDay);
  const md = [
    '## Partitioned inbox: dropping a day vs deleting it',
    '',
    `Two inboxes of ${num(r.rows)} completed rows over ${r.days} simulated days (${dayRows} a day; random UUID-shaped ids, loaded with \`INSERT … SELECT generate_series\`, then VACUUM ANALYZE), from \`${script}\`. ` +
      `Each of ${n} rounds expires one day's worth of rows (${dayRows}) in each layout, twice: once alone, after a CHECKPOINT (the old pages are cold, as a day's maintenance finds them), and once in the middle of ${r.concurrency} workers delivering new ids through \`idempotentConsumer().handle()\` (the store's claim and commit, a no-op handler), the layouts taking turns. ` +
      `“drop”: the partitioned layout's maintenance dropping the oldest day${r.layoutSource ? ` (${r.layoutSource})` : ''}. “delete”: the unpartitioned store's \`prune({ batchSize: ${num(r.batchSize)} })\`, as \`inboxkit prune\` runs it, then the VACUUM its dead rows need (autovacuum is off on the bench's tables so that it never lands inside a measurement). ` +
      `WAL is \`pg_current_wal_insert_lsn()\` before and after, on the bench's own Postgres. Claims are compared in the ${num(r.windowSeconds, 1)} s window before the operation (quiet) and from its start to its end or ${num(r.windowSeconds, 1)} s, whichever is longer (during); “running at some moment of the operation” are the claims that started before it ended and ended after it started, the ones it could hold up. Figures are the median of the rounds (min–max).`,
    '',
    '| | drop a day (partitioned) | delete a day (prune, unpartitioned) | drop / delete |',
    '|---|---:|---:|---:|',
    `| elapsed, alone | ${spread(dropMs, ms)} | ${spread(delMs, ms)} | ${spread(timeRatio, percent)} |`,
    `| WAL written, alone | ${spread(dropWal, bytes)} | ${spread(delWal, bytes)} | ${spread(walRatio, percent)} |`,
    `| the VACUUM the delete leaves: elapsed, WAL | — | ${spread(vacMs, ms)}, ${spread(vacWal, bytes)} | |`,
    `| delete + its VACUUM: elapsed, WAL | | ${spread(delVacMs, ms)}, ${spread(delVacWal, bytes)} | ${spread(ratios(dropMs, delVacMs), percent)}, ${spread(ratios(dropWal, delVacWal), percent)} |`,
    `| elapsed among ${r.concurrency} claiming workers | ${spread(
      drop.map((x) => x.withClaims.ms),
      ms,
    )} | ${spread(
      del.map((x) => x.withClaims.ms),
      ms,
    )} | ${spread(
      ratios(
        drop.map((x) => x.withClaims.ms),
        del.map((x) => x.withClaims.ms),
      ),
      percent,
    )} |`,
    `| claim p99, quiet → during | ${spread(
      drop.map((x) => x.quiet.p99),
      ms,
    )} → ${spread(
      drop.map((x) => x.during.p99),
      ms,
    )} | ${spread(
      del.map((x) => x.quiet.p99),
      ms,
    )} → ${spread(
      del.map((x) => x.during.p99),
      ms,
    )} | |`,
    `| claim p99 during / quiet | ${spread(p99Ratio(drop), times)} | ${spread(p99Ratio(del), times)} | |`,
    `| claims running at some moment of the operation: how many, p99 | ${spread(
      drop.map((x) => x.overlapping?.claims ?? Number.NaN),
      num,
    )}, ${spread(
      drop.map((x) => x.overlapping?.p99 ?? Number.NaN),
      ms,
    )} | ${spread(
      del.map((x) => x.overlapping?.claims ?? Number.NaN),
      num,
    )}, ${spread(
      del.map((x) => x.overlapping?.p99 ?? Number.NaN),
      ms,
    )} | |`,
    `| slowest claim during / quiet | ${spread(maxRatio(drop), times)} | ${spread(maxRatio(del), times)} | |`,
    `| claims/s, quiet → during | ${spread(
      drop.map((x) => x.quiet.perSecond),
      num,
    )} → ${spread(
      drop.map((x) => x.during.perSecond),
      num,
    )} | ${spread(
      del.map((x) => x.quiet.perSecond),
      num,
    )} → ${spread(
      del.map((x) => x.during.perSecond),
      num,
    )} | |`,
    `| claims/s during / quiet | ${spread(rateRatio(drop), times)} | ${spread(rateRatio(del), times)} | |`,
    `| table + indexes after the load | ${bytes(r.loaded.partitioned.tableBytes)} + ${bytes(r.loaded.partitioned.indexBytes)} | ${bytes(r.loaded.unpartitioned.tableBytes)} + ${bytes(r.loaded.unpartitioned.indexBytes)} | |`,
    `| table + indexes after ${2 * n} days expired (and the claims' new rows) | ${lastP ? `${bytes(lastP.tableBytes)} + ${bytes(lastP.indexBytes)}` : '—'} | ${lastU ? `${bytes(lastU.tableBytes)} + ${bytes(lastU.indexBytes)}` : '—'} | |`,
    '',
    `Bytes per row after the load (table, then indexes; the indexes built by the load's inserts in random id order, as traffic builds them): partitioned ${num(r.loaded.partitioned.tableBytesPerRow, 1)} + ${num(r.loaded.partitioned.indexBytesPerRow, 1)}, unpartitioned ${num(r.loaded.unpartitioned.tableBytesPerRow, 1)} + ${num(r.loaded.unpartitioned.indexBytesPerRow, 1)}. ` +
      `WAL per claim in the quiet windows: partitioned ${spread(
        drop.map((x) => x.walPerQuietClaim),
        (v) => `${num(v)} B`,
      )}, unpartitioned ${spread(
        del.map((x) => x.walPerQuietClaim),
        (v) => `${num(v)} B`,
      )}.` +
      (r.loadAverage
        ? ` Load average (1 min) at the start of the section ${num(r.loadAverage.start, 1)}, at its end ${num(r.loadAverage.end, 1)}.`
        : ''),
    '',
  ];
  const label = `${num(r.rows)} rows, ${dayRows} a day, ${n} rounds`;
  // The drop's WAL and time are nearly constant while the delete's grow with the rows of a day: the 1% targets
  // are set for a day of a million rows (10M over 10 days) and judged only there; smaller runs report them.
  const judged = r.perDay >= 1_000_000;
  const targets: PartitionTarget[] = [
    {
      figure: `partitions: WAL of dropping a day / of deleting it with prune (${label})`,
      measured: spread(walRatio, percent),
      target: judged ? '< 1%' : '< 1% (judged at 1M rows a day)',
      ok: judged ? median(walRatio) < 0.01 : undefined,
    },
    {
      figure: `partitions: time of dropping a day / of deleting it with prune (${label})`,
      measured: spread(timeRatio, percent),
      target: judged ? '< 1%' : '< 1% (judged at 1M rows a day)',
      ok: judged ? median(timeRatio) < 0.01 : undefined,
    },
    {
      figure: `partitions: claim p99 while a day is dropped / quiet (c${r.concurrency})`,
      measured: spread(p99Ratio(drop), times),
      target: '≤ 1.5×',
      ok: median(p99Ratio(drop)) <= 1.5,
    },
    {
      figure: `partitions: claim p99 while a day is deleted with prune / quiet (c${r.concurrency})`,
      measured: spread(p99Ratio(del), times),
      target: '(reported)',
      ok: undefined,
    },
  ];
  return { md, targets };
}
