// The torture table: one column per transport, one row per figure, then every violation in words.

import type { TransportReport } from './run-torture.js';

function cell(value: string | number | undefined): string {
  if (value === undefined) return '—';
  return typeof value === 'number' ? value.toLocaleString('en-US') : value;
}

function exits(r: TransportReport): string | number {
  const starting = r.unexpectedExits.filter((e) => e.includes('while starting')).length;
  return starting > 0 ? `${r.unexpectedExits.length} (${starting} at start-up)` : r.unexpectedExits.length;
}

/** Whether the run holds: no violation and no failed run. */
export function passed(report: TransportReport): boolean {
  return report.error === undefined && report.verdict !== undefined && report.verdict.violations.length === 0;
}

export function formatReport(reports: readonly TransportReport[]): string {
  const rows: [string, (r: TransportReport) => string | number | undefined][] = [
    ['messages sent', (r) => r.sent + r.resent],
    ['  of which resent (unconfirmed send)', (r) => r.resent],
    ['distinct ids', (r) => r.distinct],
    ['planned duplicate sends (30%)', (r) => r.plannedDuplicates],
    ['poison ids (1%)', (r) => r.verdict?.poisonExpected],
    ['deliveries handled (≥)', (r) => r.deliveries],
    ['duplicates delivered (≥)', (r) => r.duplicatesDelivered],
    ['duplicates suppressed (≥)', (r) => r.duplicatesSuppressed],
    ['retries (≥)', (r) => r.retries],
    ['consumers (processes)', (r) => r.consumers],
    ['consumer kills (SIGKILL)', (r) => r.kills],
    ['  busy: effects growing at the kill', (r) => r.busyKills],
    ['  IDLE: found doing nothing', (r) => r.idleKills],
    ['consumer starts', (r) => r.consumerStarts],
    ['consumer exits not caused by the harness', (r) => exits(r)],
    ['broker restart', (r) => r.brokerRestart],
    ['postgres restart', (r) => r.postgresRestart],
    ['quiescent', (r) => (r.quiescent ? 'yes' : `no (backlog ${cell(r.backlogAtEnd)})`)],
    ['EFFECTS APPLIED TWICE', (r) => r.verdict?.appliedTwice],
    ['LOST', (r) => r.verdict?.lost],
    ['HEALTHY IDS DEAD-LETTERED', (r) => r.verdict?.healthyDeadLettered],
    [
      'dead-lettered (poison ids in DLQ)',
      (r) => (r.verdict ? `${r.verdict.deadLettered}/${r.verdict.poisonExpected}` : undefined),
    ],
    ['extra DLQ copies (deduplicated)', (r) => r.verdict?.extraDeadLetterCopies],
    ['violations', (r) => (r.error !== undefined ? 'RUN FAILED' : r.verdict?.violations.length)],
    ['seconds', (r) => Math.round(r.seconds)],
    ['verdict', (r) => (passed(r) ? 'PASS' : 'FAIL')],
  ];
  const header = ['', ...reports.map((r) => r.label)];
  const body = rows.map(([label, get]) => [label, ...reports.map((r) => cell(get(r)))]);
  const widths = header.map((_, c) => Math.max(...[header, ...body].map((row) => row[c]!.length)));
  const line = (row: string[]): string =>
    row.map((v, c) => (c === 0 ? v.padEnd(widths[c]!) : v.padStart(widths[c]!))).join('  ');
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)];
  for (const r of reports) {
    const problems = [
      ...(r.verdict?.violations ?? []),
      ...(r.error !== undefined ? [`run failed: ${r.error}`] : []),
    ];
    if (problems.length > 0) {
      out.push('', `${r.label}: ${problems.length} problem(s) — schema ${r.schema} kept for inspection`);
      for (const p of problems) out.push(`  - ${p}`);
    }
    if (r.unexpectedExits.length > 0) {
      out.push('', `${r.label}: consumers that exited by themselves (restarted by the harness):`);
      for (const e of r.unexpectedExits.slice(0, 10)) out.push(`  - ${e}`);
    }
  }
  return out.join('\n');
}
