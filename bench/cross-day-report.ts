// The `crossday` section of the bench page, from bench/partition-cross-day.ts' result: what the partitioned
// inbox's cross-day check costs a claim, against the check off and against an "id index" table, on the server
// alone and through the consumer. Medians (min–max) of the rounds.

type Variant = 'off' | 'on' | 'id-index';

interface Figures {
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
}

/** What bench/partition-cross-day.ts prints after `BENCH_RESULT`. */
export interface CrossDayResult {
  readonly rows: number;
  readonly days: number;
  readonly rounds: number;
  readonly seconds: number;
  readonly concurrency: number;
  readonly partitions: number;
  readonly load: { readonly start: number; readonly end: number };
  readonly summary: Record<Variant, Record<'first' | 'duplicate', { readonly rounds: readonly Figures[] }>>;
  readonly server: Record<Variant, { readonly rounds: readonly number[] }>;
}

const VARIANTS: readonly [Variant, string][] = [
  ['off', 'check off'],
  ['on', 'check on (default)'],
  ['id-index', 'id index instead'],
];

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

function spread(xs: readonly number[], f: (n: number) => string): string {
  if (xs.length === 0) return '—';
  return `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
}

const us = (n: number): string => `${Math.round(n)} µs`;
const ms = (n: number): string => `${n.toFixed(1)} ms`;
const rate = (n: number): string => `${Math.round(n).toLocaleString('en-US')}/s`;

export function crossDaySection(r: CrossDayResult, script: string): string[] {
  const off = r.server.off.rounds;
  const extra = (v: Variant): number[] => r.server[v].rounds.map((x, i) => x - (off[i] ?? Number.NaN));
  const rows = VARIANTS.map(([v, label]) => {
    const first = r.summary[v].first.rounds;
    const dup = r.summary[v].duplicate.rounds;
    return `| ${label} | ${spread(r.server[v].rounds, us)} | ${v === 'off' ? '—' : spread(extra(v), us)} | ${spread(first.map((x) => x.perSecond), rate)}, p99 ${spread(first.map((x) => x.p99), ms)} | ${spread(dup.map((x) => x.perSecond), rate)}, p99 ${spread(dup.map((x) => x.p99), ms)} |`;
  });
  return [
    '## Partitioned inbox: the cross-day check',
    '',
    `From \`${script}\`: one partitioned inbox of ${r.rows.toLocaleString('en-US')} completed rows over ${r.days} past days (${r.partitions} leaf partitions of the hot table), ${r.rounds} rounds, the variants taking turns. Server side: the claim function alone in a DO block, each claim committed (synchronous_commit off in that session). Through the consumer: ${r.concurrency} workers for ${r.seconds} s of first deliveries, then their redeliveries (duplicates). Load average (1 min) ${r.load.start.toFixed(1)} at the start, ${r.load.end.toFixed(1)} at the end.`,
    '',
    '| | server: per claim | server: more than off | consumer: first deliveries | consumer: duplicates |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...rows,
    '',
  ];
}
