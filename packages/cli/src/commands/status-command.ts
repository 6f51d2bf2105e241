// `inboxkit status`: the inbox per consumer, as a table or JSON.

import type { StatusCommand } from '../command-line.js';
import { inboxStatus } from '../inbox/inbox-status.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import type { InboxStatusReport } from '../inbox/inbox-status.js';
import { formatTable } from '../output/format-table.js';
import { writeJson } from '../output/write-json.js';
import { formatDuration } from '../settings/parse-values.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';
import { displayName, displayText } from '../output/display-text.js';

/** Runs `status`; returns the exit code. */
export async function runStatus(command: StatusCommand, context: CommandContext): Promise<number> {
  const database = await context.services.openDatabase(command.connection);
  try {
    const report = await withInboxTable(command.connection, () =>
      inboxStatus(database.db, {
        schema: command.connection.schema,
        table: command.connection.table,
        consumer: command.consumer,
        expiringWithinMs: command.expiringWithinMs,
        dedupeWindowMs: command.dedupeWindowMs,
      }),
    );
    if (command.json) writeJson(context.io.stdout, report);
    else context.io.stdout.write(renderStatus(report, command.consumer));
    return EXIT.ok;
  } finally {
    await database.close();
  }
}

/** The human-readable report. */
export function renderStatus(report: InboxStatusReport, consumer: string | undefined): string {
  const lines = [`Inbox ${displayText(report.table)} at ${report.at.toISOString()}`];
  if (report.consumers.length === 0) {
    lines.push(consumer === undefined ? 'No rows.' : `No rows for consumer ${displayName(consumer)}.`);
    return `${lines.join('\n')}\n`;
  }
  lines.push('');
  lines.push(
    formatTable(
      [
        'consumer',
        'completed',
        'processing',
        'failed',
        'dead_lettered',
        'replayed',
        `expiring <${formatDuration(report.expiringWithinMs)}`,
        'expired, not pruned',
        'oldest row',
      ],
      report.consumers.map((c) => [
        displayName(c.consumer),
        c.rows.completed,
        c.rows.processing,
        c.rows.failed,
        c.rows.dead_lettered,
        c.replayed,
        c.expiringSoon,
        c.expiredNotPruned,
        c.oldestRowAgeMs === undefined
          ? '-'
          : `${formatDuration(c.oldestRowAgeMs)}${c.oldestBeyondWindow ? ' (> window)' : ''}`,
      ]),
    ),
  );
  for (const c of report.consumers) {
    const notes: string[] = [];
    const p = c.oldestProcessing;
    if (p !== undefined) {
      const age = formatDuration(p.ageMs);
      const lease =
        p.lease === 'none' || p.lockedUntil === undefined
          ? 'no lease (an attempt in a transaction, or recorded as started)'
          : p.lease === 'expired'
            ? `lease EXPIRED ${formatDuration(report.at.getTime() - p.lockedUntil.getTime())} ago: the next delivery takes it over`
            : `lease ends in ${formatDuration(p.lockedUntil.getTime() - report.at.getTime())}`;
      notes.push(`oldest processing: ${displayName(p.messageId)}, received ${age} ago, ${lease}`);
    }
    const reasons = Object.entries(c.deadLettersByReason);
    if (reasons.length > 0)
      notes.push(`dead letters by reason: ${reasons.map(([r, n]) => `${displayName(r)} ${n}`).join(', ')}`);
    if (c.rows.discarded > 0 || c.rows.archived > 0) {
      notes.push(
        `retired dead letters: ${c.rows.discarded} discarded, ${c.rows.archived} archived (out of the live views; \`inboxkit prune\` deletes them after their retention)`,
      );
    }
    if (c.expiredNotPruned > 0 && c.pruneLagMs !== undefined) {
      notes.push(
        `${c.expiredNotPruned} expired completed rows not pruned yet, the oldest expired ${formatDuration(c.pruneLagMs)} ago: ` +
          (c.pruneLagMs > 3_600_000
            ? 'the pruner is behind or not running; run `inboxkit prune` and check it'
            : 'the pruner will take them'),
      );
    }
    if (c.lastReplay !== undefined) {
      const r = c.lastReplay;
      notes.push(
        `last replay: ${displayName(r.replayId)} by ${displayName(r.requestedBy ?? '?')}, handled ${r.at.toISOString()} (${displayText(r.outcome)})`,
      );
    }
    if (notes.length > 0) lines.push(`${displayName(c.consumer)}:`, ...notes.map((n) => `  ${n}`));
  }
  return `${lines.join('\n')}\n`;
}
