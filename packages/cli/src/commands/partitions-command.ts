// `inboxkit partitions`: partition maintenance of a partitioned inbox (layout `daily-partitions`) through core's
// maintainInboxPartitions — the same function startPartitionMaintenance runs in process — printing each day as
// it is made or dropped, then a summary. One runner at a time across hosts (core's advisory lock).

import { maintainInboxPartitions, type PartitionStep } from '@inboxkit/core/postgres';

import type { PartitionsCommand } from '../command-line.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import { writeJson } from '../output/write-json.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Runs `partitions`; returns the exit code (1 when another runner held the lock or a day waited in vain). */
export async function runPartitions(command: PartitionsCommand, { io, services, clock }: CommandContext): Promise<number> {
  const { schema, table } = command.connection;
  const database = await services.openDatabase(command.connection);
  try {
    const started = clock.now();
    const result = await withInboxTable(command.connection, () =>
      maintainInboxPartitions(
        { db: database.db },
        {
          schema,
          table,
          aheadDays: command.aheadDays,
          dedupeWindowMs: command.dedupeWindowMs,
          lockTimeoutMs: command.lockTimeoutMs,
          dryRun: command.dryRun,
          ...(command.json ? {} : { onStep: (step: PartitionStep) => io.stdout.write(`${describe(step)}\n`) }),
        },
      ),
    );
    const elapsedMs = clock.now() - started;
    const busy = result.steps.filter((s) => s.action === 'busy').length;
    if (command.json) {
      writeJson(io.stdout, { table: `${schema}.${table}`, ...result, elapsedMs });
    } else {
      const count = (action: PartitionStep['action']) => result.steps.filter((s) => s.action === action).length;
      const days = result.days.length === 0 ? 'none' : `${result.days[0]} .. ${result.days[result.days.length - 1]} (${result.days.length})`;
      if (result.status === 'locked') io.stdout.write('Another runner holds the partition lock of this inbox; stopped. Try again later.\n');
      if (result.legacy.status === 'retired') io.stdout.write(`retired ${table}_legacy (${result.legacy.movedRows} open rows moved into the partitions)\n`);
      if (result.legacy.status === 'kept') io.stdout.write(`kept ${table}_legacy: a completed row in it is still inside its dedupe window\n`);
      io.stdout.write(
        result.status === 'dry-run'
          ? `Dry run on ${schema}.${table} (today ${result.today} UTC): ${count('would-create')} days to make, ${count('would-drop')} to drop. Nothing was changed.\n`
          : `${schema}.${table} (today ${result.today} UTC): made ${count('created')} days, dropped ${count('dropped')}, kept ${count('kept')}, ${busy} waited past the lock timeout; days now ${days}; ${elapsedMs} ms.\n`,
      );
    }
    return result.status === 'locked' || busy > 0 || result.legacy.status === 'busy' ? EXIT.failed : EXIT.ok;
  } finally {
    await database.close();
  }
}

function describe(step: PartitionStep): string {
  switch (step.action) {
    case 'created':
      return `made ${step.day}${step.movedRows > 0 ? ` (${step.movedRows} rows moved in from the default partition)` : ''}`;
    case 'dropped':
      return `dropped ${step.day}${step.movedRows > 0 ? ` (${step.movedRows} open rows moved to the default partition)` : ''}`;
    case 'kept':
      return `kept ${step.day}: ${step.reason === 'unexpired' ? 'a completed row in it is still inside its dedupe window' : 'not yet past the window'}`;
    case 'busy':
      return `left ${step.day} for the next run: the ${step.change === 'create' ? 'attach' : 'drop'} waited past the lock timeout (a long transaction holds the inbox)`;
    case 'would-create':
      return `would make ${step.day}`;
    case 'would-drop':
      return `would drop ${step.day}${step.unexpired ? ' (but a completed row in it is not yet expired: it would be kept)' : ''}${step.openRows > 0 ? `, moving ${step.openRows} open rows to the default partition` : ''}`;
  }
}
