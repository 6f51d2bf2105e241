// `inboxkit prune`: deletes expired completed rows through core's pruner (batched, one runner at a time via
// the same advisory lock the in-process pruner takes). Rows in other states are never pruned.

import type { PruneCommand } from '../command-line.js';
import { inboxStore } from '../inbox/inbox-store.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import { writeJson } from '../output/write-json.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Runs `prune`; returns the exit code (1 when another pruner holds the lock). */
export async function runPrune(command: PruneCommand, context: CommandContext): Promise<number> {
  const { io, clock } = context;
  const database = await context.services.openDatabase(command.connection);
  try {
    const store = inboxStore(database.db, command.connection);
    const started = clock.now();
    const result = await withInboxTable(command.connection, () =>
      store.prune({
        ...(command.consumer !== undefined ? { consumer: command.consumer } : {}),
        batchSize: command.batchSize,
        dryRun: command.dryRun,
      }),
    );
    const elapsedMs = clock.now() - started;
    const scope = command.consumer === undefined ? 'all consumers' : `consumer ${command.consumer}`;
    if (command.json) {
      writeJson(io.stdout, {
        table: `${store.names.schema}.${store.names.table}`,
        consumer: command.consumer ?? null,
        ...result,
        elapsedMs,
      });
    } else if (result.status === 'locked') {
      io.stdout.write(
        'Another pruner holds the prune lock of this table; nothing was done. Try again later.\n',
      );
    } else if (result.status === 'dry-run') {
      io.stdout.write(
        `Dry run: ${result.deleted} expired completed rows would be deleted (${scope}). Nothing was deleted.\n`,
      );
    } else {
      io.stdout.write(
        `Deleted ${result.deleted} expired completed rows in ${result.batches} batch(es) of up to ${command.batchSize} (${scope}), ${elapsedMs} ms.\n`,
      );
    }
    return result.status === 'locked' ? EXIT.failed : EXIT.ok;
  } finally {
    await database.close();
  }
}
