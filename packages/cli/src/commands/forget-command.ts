// `inboxkit forget`: forget one id — delete its completed inbox row on purpose (audited), so the message can be
// processed again. Rows in any other state are left alone.

import { randomUUID } from 'node:crypto';

import type { ForgetCommand } from '../command-line.js';
import { inboxStore } from '../inbox/inbox-store.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import { displayName } from '../output/display-text.js';
import { writeJson } from '../output/write-json.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Runs `forget`; returns the exit code (1 when nothing was forgotten). */
export async function runForget(command: ForgetCommand, context: CommandContext): Promise<number> {
  const { io, services } = context;
  const database = await services.openDatabase(command.connection);
  try {
    const store = inboxStore(database.db, command.connection);
    const actionId = randomUUID();
    const result = await withInboxTable(command.connection, () =>
      store.forgetCompleted({
        consumer: command.consumer,
        messageId: command.messageId,
        actionId,
        requestedBy: command.requestedBy,
        reason: command.reason,
      }),
    );
    const what = `${displayName(command.messageId)} (consumer ${displayName(command.consumer)})`;
    if (command.json) writeJson(io.stdout, { actionId, ...result });
    else if (result.kind === 'forgotten') {
      io.stdout.write(
        `Forgot ${what}: its completed row is deleted, audited under ${actionId} by ${displayName(command.requestedBy)}; its next delivery is processed as new.\n`,
      );
    } else if (result.kind === 'no-row') io.stdout.write(`Nothing forgotten: ${what} has no inbox row.\n`);
    else {
      io.stdout.write(
        `Nothing forgotten: ${what} is ${result.row.status}; only a completed row is forgotten (replay a dead letter instead).\n`,
      );
    }
    return result.kind === 'forgotten' ? EXIT.ok : EXIT.failed;
  } finally {
    await database.close().catch(() => undefined);
  }
}
