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
  /** enqueue in the handler's transaction + one relay, end to end. */
  readonly outbox: Figures;
  /** The relay alone over a committed backlog. */
  readonly drain: Figures;
}

export interface BenchReport {
  readonly messages: number;
  readonly handlers: number;
  readonly batchSize: number;
  readonly latencyRate: number;
  readonly latencyMessages: number;
  readonly target: number;
  readonly brokers: readonly string[];
  readonly results: Readonly<Record<string, BrokerFigures>>;
}

const f0 = (n: number): string => Math.round(n).toLocaleString('en-US');
const f1 = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? '—' : n.toFixed(1));

export function formatBenchReport(r: BenchReport): string {
  const out: string[] = [
    `Outbox relay vs direct publish from the handler: ${r.messages} messages per variant, ${r.handlers} handlers, relay batchSize ${r.batchSize}, unkeyed; latency at ${r.latencyRate}/s over ${r.latencyMessages} messages`,
    '',
  ];
  for (const broker of r.brokers) {
    const f = r.results[broker];
    if (f === undefined) continue;
    const ratio = f.outbox.perSecond / f.direct.perSecond;
    out.push(broker, `  ratio relay/direct: ${ratio.toFixed(2)}× (target ≥ ${r.target}×)${ratio >= r.target ? '' : ' BELOW TARGET'}`);
  }
  out.push('', '| variant | msg/s | p50 ms | p99 ms |', '|---|---:|---:|---:|');
  for (const broker of r.brokers) {
    const f = r.results[broker];
    if (f === undefined) continue;
    out.push(`| ${broker} direct (publish in the handler) | ${f0(f.direct.perSecond)} | ${f1(f.direct.p50)} | ${f1(f.direct.p99)} |`);
    out.push(`| ${broker} outbox (enqueue + relay) | ${f0(f.outbox.perSecond)} | ${f1(f.outbox.p50)} | ${f1(f.outbox.p99)} |`);
    out.push(`| ${broker} relay drain (backlog) | ${f0(f.drain.perSecond)} | — | — |`);
  }
  return out.join('\n');
}
