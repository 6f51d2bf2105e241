// `inboxkit dlq replay`: wires the replay engine to the real transport and inbox, draws progress, prints the
// summary and chooses the exit code.

import { randomUUID } from 'node:crypto';

import type { DlqReplayCommand } from '../command-line.js';
import type { OpenedDatabase } from '../cli-services.js';
import { openInboxStore } from '../inbox/inbox-store.js';
import { postgresInboxLookup } from '../inbox/postgres-inbox-lookup.js';
import { formatTable, truncate } from '../output/format-table.js';
import { ReplayProgress } from '../output/replay-progress.js';
import { writeJson } from '../output/write-json.js';
import { describePrediction, REPLAY_PREDICTIONS } from '../replay/predict-replay.js';
import { replayFromDlq } from '../replay/replay-from-dlq.js';
import type { ReplaySummary } from '../replay/replay-dead-letters.js';
import { loadConsumerModule } from '../settings/load-schemas.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';
import { displayName, displayText } from '../output/display-text.js';

/** Runs `dlq replay`; returns the exit code. */
export async function runDlqReplay(command: DlqReplayCommand, context: CommandContext): Promise<number> {
  const { io, services, clock } = context;
  let database: OpenedDatabase | undefined;
  // Loaded (and checked) before anything is opened: a bad module is exit 3 with nothing touched.
  const fingerprints =
    command.schemasModule === undefined
      ? undefined
      : (await loadConsumerModule(command.schemasModule, io.cwd ?? process.cwd())).fingerprints;
  try {
    if (command.connection.databaseUrl !== undefined) {
      database = await services.openDatabase(command.connection);
    } else {
      io.stderr.write(
        'note: no database configured (--database-url / DATABASE_URL): predictions are unknown\n',
      );
    }
    const replayId = randomUUID();
    let progress: ReplayProgress | undefined;
    const summary = await replayFromDlq(
      {
        transport: command.transport,
        from: command.from,
        group: command.group,
        to: command.to,
        filter: command.filter,
        limit: command.limit,
        ratePerSecond: command.ratePerSecond,
        dryRun: command.dryRun,
        includeParked: command.includeParked,
        replayId,
        requestedBy: command.requestedBy,
        fingerprints,
      },
      {
        services,
        connection: command.connection,
        inbox:
          database === undefined
            ? undefined
            : postgresInboxLookup(database.db, await openInboxStore(database.db, command.connection)),
        clock,
        signal: io.signal,
        onOpened: (transport, to) => {
          io.stderr.write(
            `${command.dryRun ? 'dry run of replay' : 'replay'} ${replayId} by ${displayName(command.requestedBy)}: ${command.transport} DLQ ${displayName(maskConnectionString(command.from))}${to === undefined ? '' : ` -> ${displayName(maskConnectionString(to))}`}\n`,
          );
          if (command.dryRun && !transport.reader.nonDestructiveBrowse) {
            io.stderr.write(
              `note: ${command.transport} cannot peek; the dry run receives and releases each message (receive counts rise, order may change)\n`,
            );
          }
          progress = new ReplayProgress(io.stderr, clock, { total: command.limit, dryRun: command.dryRun });
        },
        onEntry: (entry) => progress?.onEntry(entry),
      },
    );
    progress?.finish();
    if (command.json) writeJson(io.stdout, summary);
    else io.stdout.write(renderSummary(summary));
    if (summary.stoppedBecause === 'interrupted') return EXIT.interrupted;
    return summary.failed + summary.unreplayable > 0 ? EXIT.failed : EXIT.ok;
  } finally {
    await database?.close().catch(() => undefined);
  }
}

/** The human-readable summary of a replay. */
export function renderSummary(summary: ReplaySummary): string {
  const lines: string[] = [];
  const verb = summary.dryRun ? 'would replay' : 'replayed';
  lines.push(
    `${summary.dryRun ? 'Dry run' : 'Replay'} ${displayName(summary.replayId)} by ${displayName(summary.requestedBy)}: read ${summary.read}, ${verb} ${summary.dryRun ? summary.wouldReplay : summary.replayed}, failed ${summary.failed}, unreplayable ${summary.unreplayable}, parked ${summary.parked}, not selected ${summary.notSelected} (left in the DLQ)`,
  );
  const stopped = {
    drained: 'the DLQ was read to its end',
    limit: 'the --limit was reached',
    interrupted: 'interrupted: nothing was lost; run the same command again to continue',
    wrapped: 'every message in the DLQ was seen',
    'caught-up':
      'a message this run replayed came back to the DLQ: everything behind it arrived after the run started',
  }[summary.stoppedBecause];
  lines.push(`Stopped because ${stopped}.`);
  if (summary.deadLetteredAgain.length > 0) {
    lines.push(
      `Dead-lettered again while the run went on (they failed again; fix the cause, then replay them): ${summary.deadLetteredAgain.slice(0, 10).map(displayName).join(', ')}${summary.deadLetteredAgain.length > 10 ? ' …' : ''}`,
    );
  }
  lines.push('');
  const rows = REPLAY_PREDICTIONS.filter((p) => summary.predictions[p] > 0).map((p) => [
    p,
    summary.predictions[p],
    describePrediction(p),
  ]);
  if (rows.length > 0) {
    lines.push(
      summary.dryRun
        ? 'What the consumers will do:'
        : 'What the consumers will do with the replayed messages:',
    );
    lines.push(formatTable(['expect', 'messages', 'because the inbox row is'], rows));
  }
  if (summary.parked > 0) {
    const parked = summary.entries.filter((e) => e.action === 'parked');
    lines.push(
      `Parked (left in the DLQ; a replay of each failed before: fix the cause, then replay with --include-parked): ${parked
        .slice(0, 10)
        .map((e) => (e.id === undefined ? '(no id)' : displayName(e.id)))
        .join(', ')}${parked.length > 10 ? ' …' : ''}`,
    );
  }
  const problems = summary.entries.filter((e) => e.action === 'failed' || e.action === 'unreplayable');
  if (problems.length > 0) {
    lines.push('Not replayed (still in the DLQ):');
    lines.push(
      formatTable(
        ['id', 'consumer', 'result', 'why'],
        problems.map((e) => [
          e.id === undefined ? '(no id)' : displayName(e.id),
          e.consumer === undefined ? '?' : displayName(e.consumer),
          e.action,
          truncate(displayText(e.detail ?? ''), 100),
        ]),
      ),
    );
  }
  if (summary.dryRun && summary.entries.length > 0) {
    lines.push('Per message:');
    lines.push(
      formatTable(
        ['id', 'consumer', 'reason', 'inbox', 'expect', 'to'],
        summary.entries.map((e) => [
          e.id === undefined ? '(no id)' : displayName(e.id),
          e.consumer === undefined ? '?' : displayName(e.consumer),
          e.reason === undefined ? '?' : displayName(e.reason),
          e.inboxStatus,
          e.prediction,
          e.destination === undefined ? '-' : displayName(e.destination),
        ]),
      ),
    );
  }
  return `${lines.join('\n')}\n`;
}
