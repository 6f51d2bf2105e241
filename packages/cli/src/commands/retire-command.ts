// `inboxkit discard` and `inboxkit archive`: an audited act on a selection of one consumer's dead letters
// (core's discardDeadLetters / archiveDeadLetters). Without --yes only says what it would do (the same
// statement, rolled back) and changes nothing. `discard --transport … --from DLQ` then removes the discarded
// dead letters' copies from the broker's DLQ (replay/discard-from-dlq.ts).

import { randomUUID } from 'node:crypto';

import type { RetireDeadLettersResult } from '@inboxkit/core/postgres';

import type { RetireCommand } from '../command-line.js';
import { openInboxStore } from '../inbox/inbox-store.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import { displayName, displayText } from '../output/display-text.js';
import { writeJson } from '../output/write-json.js';
import { discardFromDlq, type DiscardFromDlqResult } from '../replay/discard-from-dlq.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Runs `discard` or `archive`; returns the exit code (1 when nothing was done: no --yes, or nothing matched). */
export async function runRetire(command: RetireCommand, context: CommandContext): Promise<number> {
  const { io, services } = context;
  const database = await services.openDatabase(command.connection);
  try {
    const store = await withInboxTable(command.connection, () => openInboxStore(database.db, command.connection));
    const actionId = randomUUID();
    const request = {
      consumer: command.consumer,
      ...(command.messageIds === undefined ? {} : { messageIds: command.messageIds }),
      ...(command.deadLetterReason === undefined ? {} : { deadLetterReason: command.deadLetterReason }),
      ...(command.since === undefined ? {} : { since: command.since }),
      ...(command.until === undefined ? {} : { until: command.until }),
      ...(command.limit === undefined ? {} : { limit: command.limit }),
      all: command.all,
      requestedBy: command.requestedBy,
      reason: command.reason,
      actionId,
      dryRun: !command.yes,
    };
    const result = await withInboxTable(command.connection, () =>
      command.command === 'discard' ? store.discardDeadLetters(request) : store.archiveDeadLetters(request),
    );
    let broker: DiscardFromDlqResult | undefined;
    if (command.yes && command.dlq !== undefined) {
      const transport = await services.openTransport(command.dlq.transport, command.connection, {
        from: command.dlq.from,
        group: command.dlq.group,
        publish: false,
      });
      try {
        broker = await discardFromDlq({
          reader: transport.reader,
          store,
          filter: {
            consumer: command.consumer,
            ids: command.messageIds,
            reasons: command.deadLetterReason === undefined ? undefined : [command.deadLetterReason],
            since: command.since,
          },
          until: command.until,
          actionId,
          requestedBy: command.requestedBy,
          reason: command.reason,
        });
      } finally {
        await transport.close().catch(() => undefined);
      }
    }
    if (command.json) writeJson(io.stdout, { ...result, ...(broker === undefined ? {} : { dlq: broker }) });
    else io.stdout.write(render(command, result, broker));
    if (!command.yes) return EXIT.failed;
    return result.changed.length > 0 || (broker !== undefined && broker.removed.length + broker.removedBrokerOnly.length > 0) ? EXIT.ok : EXIT.failed;
  } finally {
    await database.close().catch(() => undefined);
  }
}

function render(command: RetireCommand, result: RetireDeadLettersResult, broker: DiscardFromDlqResult | undefined): string {
  const verb = command.command;
  const done = verb === 'discard' ? 'Discarded' : 'Archived';
  const who = `consumer ${displayName(command.consumer)}`;
  const lines = result.changed.map(
    (r) => `  ${displayName(r.messageId)}  ${r.priorStatus}  ${displayText(r.deadLetterReason ?? '-')}  attempts ${r.attempts}`,
  );
  const out: string[] = [];
  if (result.dryRun) {
    out.push(
      result.changed.length === 0
        ? `Nothing to ${verb}: no dead letter of ${who} matches.`
        : `Would ${verb} ${result.changed.length} dead letter(s) of ${who}:`,
      ...lines,
    );
    if (result.changed.length > 0) {
      const dlq = command.dlq === undefined ? '' : `, and remove their copies from ${displayName(command.dlq.from)}`;
      out.push(`Nothing changed: rerun with --yes to ${verb} them${dlq}.`);
    }
    return `${out.join('\n')}\n`;
  }
  out.push(
    result.changed.length === 0
      ? `Nothing ${verb === 'discard' ? 'discarded' : 'archived'} in the inbox: no dead letter of ${who} matches.`
      : `${done} ${result.changed.length} dead letter(s) of ${who}, audited under ${result.actionId} by ${displayName(command.requestedBy)}:`,
    ...lines,
  );
  if (result.changed.length > 0) {
    out.push(
      verb === 'discard'
        ? 'They will never run: a redelivery is acked as a duplicate (reason discarded) until `inboxkit prune` deletes them after their retention.'
        : 'They left the live views and keep their record; `inboxkit prune` deletes them after their retention. Their broker DLQ copies stay.',
    );
  }
  if (broker !== undefined) {
    out.push(
      `Broker DLQ ${displayName(command.dlq!.from)}: removed ${broker.removed.length} copies of discarded dead letters` +
        (broker.removedBrokerOnly.length > 0 ? ` and ${broker.removedBrokerOnly.length} broker-only dead letter(s) (audited)` : '') +
        `; ${broker.released} left in place.`,
    );
  }
  return `${out.join('\n')}\n`;
}
