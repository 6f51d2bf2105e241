// `inboxkit prune`: deletes expired completed rows through core's pruner (batched, one runner at a time via
// the same advisory lock the in-process pruner takes). Rows in other states are never pruned. With
// `--target http` (or `--http`) it prunes the HTTP idempotency keys of @inboxkit/http instead, through
// `pruneIdempotencyKeys` (the same function `startIdempotencyKeyPruner` runs); `--target all` does both.

import type { PruneResult } from '@inboxkit/core';
import { ConfigurationError } from '@inboxkit/core';
import type { Kysely } from 'kysely';

import type { PruneCommand } from '../command-line.js';
import { inboxLayoutOf, inboxStore } from '../inbox/inbox-store.js';
import { sqlStates, withInboxTable } from '../inbox/with-inbox-table.js';
import { writeJson } from '../output/write-json.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** One target's result, and what `--json` prints for it. */
interface Pruned {
  readonly result: PruneResult;
  readonly report: Record<string, unknown>;
}

/** Runs `prune`; returns the exit code (1 when another pruner holds the inbox's lock). */
export async function runPrune(command: PruneCommand, context: CommandContext): Promise<number> {
  const database = await context.services.openDatabase(command.connection);
  try {
    const inbox = command.target === 'http' ? undefined : await pruneInboxRows(command, context, database.db);
    const http = command.target === 'inbox' ? undefined : await pruneHttpKeys(command, context, database.db);
    if (command.json) {
      if (inbox !== undefined && http !== undefined)
        writeJson(context.io.stdout, { inbox: inbox.report, http: http.report });
      else writeJson(context.io.stdout, (inbox ?? http)?.report);
    }
    return inbox?.result.status === 'locked' ? EXIT.failed : EXIT.ok;
  } finally {
    await database.close();
  }
}

async function pruneInboxRows(
  command: PruneCommand,
  { io, clock }: CommandContext,
  db: Kysely<unknown>,
): Promise<Pruned> {
  // A partitioned inbox is pruned only in its undated and default partitions (a day is dropped whole).
  const store = inboxStore(db, command.connection, await inboxLayoutOf(db, command.connection));
  const started = clock.now();
  const result = await withInboxTable(command.connection, () =>
    store.prune({
      ...(command.consumer !== undefined ? { consumer: command.consumer } : {}),
      batchSize: command.batchSize,
      dryRun: command.dryRun,
      retiredRetentionMs: command.retiredRetentionMs,
    }),
  );
  const retired = result.retired ?? 0;
  const completed = result.deleted - retired;
  const alsoRetired = retired === 0 ? '' : ` and ${retired} discarded/archived dead letters past their retention (${formatRetention(command.retiredRetentionMs)})`;
  const elapsedMs = clock.now() - started;
  const scope = command.consumer === undefined ? 'all consumers' : `consumer ${command.consumer}`;
  // --target inbox prints exactly this object (the output before --target existed).
  const report = {
    table: `${store.names.schema}.${store.names.table}`,
    consumer: command.consumer ?? null,
    ...result,
    elapsedMs,
  };
  if (command.json) return { result, report }; // runPrune prints it
  if (result.status === 'locked') {
    io.stdout.write(
      'Another pruner holds the prune lock of this table; nothing was done. Try again later.\n',
    );
  } else if (result.status === 'dry-run') {
    io.stdout.write(
      `Dry run: ${completed} expired completed rows${alsoRetired} would be deleted (${scope}). Nothing was deleted.\n`,
    );
  } else {
    io.stdout.write(
      `Deleted ${completed} expired completed rows${alsoRetired} in ${result.batches} batch(es) of up to ${command.batchSize} (${scope}), ${elapsedMs} ms.\n`,
    );
  }
  return { result, report };
}

async function pruneHttpKeys(
  command: PruneCommand,
  { io, clock }: CommandContext,
  db: Kysely<unknown>,
): Promise<Pruned> {
  // Loaded only when asked for, like the transports' client libraries.
  const { pruneIdempotencyKeys } = await import('@inboxkit/http');
  const table = `${command.httpTable.schema}.${command.httpTable.table}`;
  const started = clock.now();
  let result: PruneResult;
  try {
    result = await pruneIdempotencyKeys(db, {
      ...command.httpTable,
      batchSize: command.batchSize,
      dryRun: command.dryRun,
    });
  } catch (error) {
    if (sqlStates(error).some((code) => code === '42P01' || code === '3F000')) {
      throw new ConfigurationError(
        `the idempotency-key table ${table} does not exist: run migrateIdempotencyKeys (@inboxkit/http) or migrations/0003_http.sql, or pass the right --http-table`,
        { cause: error },
      );
    }
    throw error;
  }
  const elapsedMs = clock.now() - started;
  const report = { target: 'http', table, ...result, elapsedMs };
  if (command.json) return { result, report }; // runPrune prints it
  if (result.status === 'dry-run') {
    io.stdout.write(
      `Dry run: ${result.deleted} expired idempotency keys would be deleted (${table}). Nothing was deleted.\n`,
    );
  } else {
    io.stdout.write(
      `Deleted ${result.deleted} expired idempotency keys in ${result.batches} batch(es) of up to ${command.batchSize} (${table}), ${elapsedMs} ms.\n`,
    );
  }
  return { result, report };
}

/** A retention as days (or hours below a day), for the prune summary. */
function formatRetention(ms: number): string {
  return ms >= 86_400_000 ? `${Math.round((ms / 86_400_000) * 10) / 10} days` : `${Math.round((ms / 3_600_000) * 10) / 10} hours`;
}
