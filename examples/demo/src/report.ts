// The demo's printed report, section by section, at most 100 columns wide.

import type { OutcomeStatus } from '@inboxkit/core';

import type { DeadLetterRow, DemoResult, PaymentCheck, ReplayRun } from './demo-result.js';
import type { DeliveryCounts } from './demo-transport.js';
import type { StoryPayment } from './story.js';
import { withTrouble } from './story.js';
import { renderTable } from './table.js';
import type { Painter } from './table.js';

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function headerSection(
  p: Painter,
  transport: readonly string[],
  database: readonly string[],
  databaseMs: number,
): string[] {
  const block = (title: string, lines: readonly string[]): string[] =>
    lines.map((line, i) => `  ${i === 0 ? title.padEnd(9) : ' '.repeat(9)}  ${line}`);
  return [
    p.paint('inboxkit demo: a payments consumer, exactly-once effect from at-least-once delivery', 'bold'),
    ...block('transport', transport),
    ...block('database', [
      ...database.slice(0, -1),
      `${database[database.length - 1] ?? ''}, ready in ${seconds(databaseMs)}`,
    ]),
    '  consumer   "payments": charge the card (provider call with context.downstreamKey), then insert',
    '             the payment row through context.tx; the row and the inbox row commit together',
    '',
  ];
}

export function streamIntro(p: Painter, story: readonly StoryPayment[], published: number): string[] {
  const doubles = withTrouble('double-click', story);
  const one = (trouble: Parameters<typeof withTrouble>[0]): string => withTrouble(trouble, story).join(', ');
  return [
    p.paint('1 · The stream', 'bold'),
    `  ${story.length} payments from a checkout page, ${published} messages: ${doubles.length} double clicks (${doubles.join(', ')}) send`,
    '  the same payment id twice. On the way:',
    `    ${one('crash-after-commit')}  the process dies after the charge committed, before the ack`,
    `    ${one('crash-before-commit')}  the process dies after the provider call, before COMMIT`,
    `    ${one('provider-503')}  the payment provider answers 503 once`,
    `    ${one('old-app-format')}  the old mobile app sends "amount": "19.99": the schema refuses it`,
    `    ${one('card-declined')}  the card is declined: the handler throws PermanentError`,
    '',
  ];
}

export function arrivedSection(
  p: Painter,
  counts: DeliveryCounts & { published: number },
  story: readonly StoryPayment[],
): string[] {
  const crashes = counts.crashes['after-handler-before-commit'] + counts.crashes['after-commit-before-ack'];
  return [
    ...renderTable(
      [{ header: 'what arrived' }, { header: 'count', align: 'right' }, { header: '' }],
      [
        ['messages published', counts.published, 'each payment once, double clicks twice'],
        ['deliveries to the consumer', counts.deliveries, 'the broker delivers at least once'],
        ['distinct message ids', counts.distinctIds, ''],
        [
          'duplicates delivered',
          counts.duplicateCopies,
          `second copies of ${withTrouble('double-click', story).join(', ')}`,
        ],
        ['redeliveries', counts.redeliveries, 'after the crashes and the retry'],
        [
          'crashes injected',
          crashes,
          `${counts.crashes['after-handler-before-commit']} before COMMIT, ${counts.crashes['after-commit-before-ack']} between commit and ack`,
        ],
      ],
      p,
    ),
    '',
  ];
}

const OUTCOME_MEANING: Record<OutcomeStatus, string> = {
  processed: 'charged; the payment row committed with the inbox row',
  duplicate: 'suppressed: the inbox row says completed, nothing ran',
  retry: '',
  'dead-letter': '',
};

function byCount(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .map(([what, n]) => `${what} ×${n}`)
    .join(', ');
}

export function outcomesSection(
  p: Painter,
  outcomes: Readonly<Record<OutcomeStatus, number>>,
  duplicatesSuppressed: number,
  retries: Readonly<Record<string, number>>,
  deadLetters: readonly DeadLetterRow[],
): string[] {
  const reasons: Record<string, number> = {};
  for (const d of deadLetters) reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
  return [
    ...renderTable(
      [{ header: 'outcome' }, { header: 'count', align: 'right' }, { header: '', maxWidth: 70 }],
      [
        [{ text: 'processed', colour: 'green' }, outcomes.processed, OUTCOME_MEANING.processed],
        [{ text: 'duplicate', colour: 'cyan' }, outcomes.duplicate, OUTCOME_MEANING.duplicate],
        [{ text: 'retry', colour: 'yellow' }, outcomes.retry, byCount(retries)],
        [{ text: 'dead-letter', colour: 'red' }, outcomes['dead-letter'], byCount(reasons)],
      ],
      p,
    ),
    `  ${p.paint(`duplicates suppressed: ${duplicatesSuppressed}`, 'bold')} (the metric inboxkit.duplicates_suppressed: healthy, and rising)`,
    '',
  ];
}

export function deadLetterSection(p: Painter, deadLetters: readonly DeadLetterRow[]): string[] {
  return [
    `  ${p.paint(`The DLQ holds ${plural(deadLetters.length, 'message')}`, 'bold')}, each with its reason in the headers:`,
    ...renderTable(
      [
        { header: 'id' },
        { header: 'reason' },
        { header: 'attempts', align: 'right' },
        { header: 'error', maxWidth: 60 },
      ],
      deadLetters.map((d) => [d.id ?? '(none)', { text: d.reason, colour: 'red' }, d.attempts, d.error]),
      p,
    ),
    '',
  ];
}

export function replayIntro(p: Painter, kept: readonly DeadLetterRow[]): string[] {
  return [
    p.paint('2 · Fix the cause, then replay the DLQ', 'bold'),
    '  fix     v2 of the consumer also reads the old app\'s "amount": "19.99" (deployed: restarted)',
    '  replay  reason schema-invalid, through replayDeadLetters() from @inboxkit/cli, the engine behind',
    '          `inboxkit dlq replay`: original id + replay marker, confirmed publish, then removal',
    ...kept.map((d) => `  keep    ${d.id} (${d.reason}): a declined card needs the customer, not a replay`),
    '',
  ];
}

function explain(outcome: ReplayRun['outcomes'][number]): string {
  switch (outcome.status) {
    case 'processed':
      return `reopened from dead_lettered and charged once (attempt ${outcome.attempt ?? '?'})`;
    case 'duplicate':
      return `skipped: already completed (${outcome.reason ?? 'duplicate'})`;
    case 'retry':
      return `to be retried (${outcome.reason ?? ''})`;
    case 'dead-letter':
      return `dead-lettered again (${outcome.reason ?? ''})`;
  }
}

export function replaySection(p: Painter, run: ReplayRun, title: string): string[] {
  return [
    `  ${p.paint(run.replayId, 'bold')}: ${title}`,
    ...renderTable(
      [{ header: 'id' }, { header: 'outcome' }, { header: 'what the inbox did', maxWidth: 70 }],
      run.outcomes.map((o) => [
        o.id,
        {
          text: o.status,
          colour: o.status === 'processed' ? 'green' : o.status === 'duplicate' ? 'cyan' : 'red',
        },
        explain(o),
      ]),
      p,
    ),
    '',
  ];
}

function checkCell(check: PaymentCheck): { text: string; colour: 'green' | 'red' } {
  if (check.ok) return { text: `✓ ${check.note}`.trimEnd(), colour: 'green' };
  const problems: string[] = [];
  if (check.rows !== check.expected) problems.push(`${check.rows} rows, expected ${check.expected}`);
  if (check.charges !== check.expected) problems.push(`${check.charges} charges, expected ${check.expected}`);
  if (check.keys > 1) problems.push(`${check.keys} different keys`);
  return { text: `✗ ${problems.join('; ')}`, colour: 'red' };
}

export function checkSection(
  p: Painter,
  result: Pick<DemoResult, 'payments' | 'ok' | 'inbox' | 'deadLettersLeft'>,
): string[] {
  const charged = result.payments.filter((c) => c.expected === 1 && c.ok).length;
  const declined = result.payments.filter((c) => c.expected === 0 && c.ok).length;
  const twice = result.payments.filter((c) => c.rows > 1 || c.charges > 1).length;
  const inbox = Object.entries(result.inbox)
    .map(([status, n]) => `${n} ${status}`)
    .join(', ');
  const verdict = result.ok
    ? p.paint(
        `✓ exactly once: ${charged} payments charged once, ${declined} declined and never charged, 0 charged twice`,
        'green',
      )
    : p.paint(
        `✗ exactly-once violated: ${result.payments.filter((c) => !c.ok).length} payments wrong, ${twice} charged twice`,
        'red',
      );
  return [
    p.paint('3 · Check: each payment charged exactly once', 'bold'),
    '  rows: the payments table (no unique key on payment_id: a second charge would show); calls, keys',
    "  and charges: the provider's request log",
    ...renderTable(
      [
        { header: 'payment' },
        { header: 'rows', align: 'right' },
        { header: 'calls', align: 'right' },
        { header: 'keys', align: 'right' },
        { header: 'charges', align: 'right' },
        { header: 'check', maxWidth: 54 },
      ],
      result.payments.map((c) => [c.paymentId, c.rows, c.providerCalls, c.keys, c.charges, checkCell(c)]),
      p,
    ),
    '',
    `  ${p.paint(verdict, 'bold')}`,
    `  inbox rows: ${inbox}; dead letters left in the DLQ: ${result.deadLettersLeft}`,
    '',
  ];
}

export function footer(p: Painter, totalMs: number): string[] {
  // performance.now() counts from the start of the process: Node's start-up and the imports included.
  return [
    p.paint(
      `finished in ${seconds(totalMs)} (${seconds(performance.now())} since the process started)`,
      'dim',
    ),
  ];
}
