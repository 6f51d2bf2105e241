// `inboxkit forget`: forget one id — delete its completed inbox row on purpose (audited), so the message can be
// processed again. Rows in any other state are left alone.

import { randomUUID } from 'node:crypto';

import type { ForgetCommand } from '../command-line.js';
import { inboxStore } from '../inbox/inbox-store.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import { openFastPathEntries } from '../inbox/fast-path-entries.js';
import { displayName, displayText } from '../output/display-text.js';
import { writeJson } from '../output/write-json.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Runs `forget`; returns the exit code (1 when nothing was forgotten). */
export async function runForget(command: ForgetCommand, context: CommandContext): Promise<number> {
  const { io, services } = context;
  // Redis first: when it cannot be reached, nothing is forgotten (the row and the entry go together).
  const fastPath = command.fastPath === undefined ? undefined : await openFastPathEntries(command.fastPath);
  let database: Awaited<ReturnType<typeof services.openDatabase>>;
  try {
    database = await services.openDatabase(command.connection);
  } catch (error) {
    await fastPath?.close();
    throw error;
  }
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
    // The entry goes after the row: a delivery answered by the inbox between the two may write it again, a
    // moment before it is deleted, never after (docs/fast-path.md).
    let fastPathEntry: 'deleted' | 'not-deleted' | 'no-fast-path' = 'no-fast-path';
    let fastPathError: unknown;
    if (result.kind === 'forgotten' && fastPath !== undefined) {
      try {
        await fastPath.forget(await store.identity(), command.consumer, command.messageId);
        fastPathEntry = 'deleted';
      } catch (error) {
        fastPathEntry = 'not-deleted';
        fastPathError = error;
      }
    }
    if (command.json)
      writeJson(io.stdout, {
        actionId,
        ...result,
        ...(result.kind === 'forgotten' ? { fastPathEntry } : {}),
      });
    else if (result.kind === 'forgotten') {
      const next =
        fastPathEntry === 'deleted'
          ? 'its fast-path entry in Redis is deleted too; its next delivery is processed as new'
          : fastPathEntry === 'not-deleted'
            ? `its fast-path entry in Redis could NOT be deleted (${displayText(fastPathError instanceof Error ? fastPathError.message : String(fastPathError))}): while it lives (up to the dedupe window) the consumers' fast path still answers its deliveries duplicate; run forget again`
            : 'its next delivery is processed as new, unless the consumers use a Redis fast path: pass --redis-url (or set REDIS_URL) to delete its entry there too, or the fast path answers its deliveries duplicate for up to the dedupe window';
      io.stdout.write(
        `Forgot ${what}: its completed row is deleted, audited under ${actionId} by ${displayName(command.requestedBy)}; ${next}.\n`,
      );
    } else if (result.kind === 'no-row') io.stdout.write(`Nothing forgotten: ${what} has no inbox row.\n`);
    else {
      io.stdout.write(
        `Nothing forgotten: ${what} is ${result.row.status}; only a completed row is forgotten (replay a dead letter instead).\n`,
      );
    }
    return result.kind === 'forgotten' && fastPathEntry !== 'not-deleted' ? EXIT.ok : EXIT.failed;
  } finally {
    await fastPath?.close();
    await database.close().catch(() => undefined);
  }
}
