// The outbox bench's printed report, kept apart so a test can check that bench/parse-output.ts reads it: per
// broker a section heading and `ratio relay/direct: 0.82× (target ≥ 0.7×)`, then one markdown table
// `| variant | msg/s | p50 ms | p99 ms |`.

export interface Figures {
  readonly perSecond: number;
  readonly p50?: number;
  readonly p99?: number;
}

export interface BrokerFigures {
  /** Publishing from the handler, inside its transaction. */
  readonly direct: Figures;
  /** enqueue in the handler's transaction + one relay (LISTEN/NOTIFY), end to end. */
  readonly outbox: Figures;
  /** The same with `notify: false` and a relay polling every 50 ms. */
  readonly quiet: Figures;
  /** The paced rate of the latency runs (msg/s). */
  readonly latencyRate: number;
  /** The relay alone over a committed backlog. */
  readonly drain: Figures;
}

export interface BenchReport {
  readonly messages: number;
  readonly handlers: number;
  readonly batchSize: number;
  readonly target: number;
  readonly brokers: readonly string[];
  readonly results: Readonly<Record<string, BrokerFigures>>;
}

const f0 = (n: number): string => Math.round(n).toLocaleString('en-US');
const f1 = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? '—' : n.toFixed(1));

export function formatBenchReport(r: BenchReport): string {
  const out: string[] = [
    `Outbox relay vs direct publish from the handler: ${r.messages} messages per variant, ${r.handlers} handlers, relay batchSize ${r.batchSize}, unkeyed; latency paced at half the slowest variant's rate (at most 300/s)`,
    '',
  ];
  for (const broker of r.brokers) {
    const f = r.results[broker];
    if (f === undefined) continue;
    const ratio = f.outbox.perSecond / f.direct.perSecond;
    out.push(
      broker,
      `  ratio relay/direct: ${ratio.toFixed(2)}× (target ≥ ${r.target}×)${ratio >= r.target ? '' : ' BELOW TARGET'}`,
      `  ratio relay without NOTIFY/direct: ${(f.quiet.perSecond / f.direct.perSecond).toFixed(2)}×`,
    );
  }
  out.push('', '| variant | msg/s | p50 ms | p99 ms |', '|---|---:|---:|---:|');
  for (const broker of r.brokers) {
    const f = r.results[broker];
    if (f === undefined) continue;
    out.push(`| ${broker} direct (publish in the handler) | ${f0(f.direct.perSecond)} | ${f1(f.direct.p50)} | ${f1(f.direct.p99)} |`);
    out.push(`| ${broker} outbox (enqueue + relay) | ${f0(f.outbox.perSecond)} | ${f1(f.outbox.p50)} | ${f1(f.outbox.p99)} |`);
    out.push(`| ${broker} outbox, notify off (relay polls 50 ms) | ${f0(f.quiet.perSecond)} | ${f1(f.quiet.p50)} | ${f1(f.quiet.p99)} |`);
    out.push(`| ${broker} relay drain (backlog) | ${f0(f.drain.perSecond)} | — | — |`);
  }
  out.push('', `latency runs: ${r.brokers.map((b) => `${b} ${f0(r.results[b]?.latencyRate ?? 0)}/s`).join(', ')}`);
  return out.join('\n');
}
