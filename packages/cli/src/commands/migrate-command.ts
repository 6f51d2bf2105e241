// `inboxkit migrate`: applies core's inbox migrations (the same Kysely Migrator provider applications use),
// so the CLI and the library can never disagree about the schema.

import { migrateInbox } from '@inboxkit/core/postgres';

import type { MigrateCommand } from '../command-line.js';
import { writeJson } from '../output/write-json.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Runs `migrate`; returns the exit code. */
export async function runMigrate(command: MigrateCommand, context: CommandContext): Promise<number> {
  const { io } = context;
  const { schema, table } = command.connection;
  const database = await context.services.openDatabase(command.connection);
  try {
    const result = await migrateInbox(database.db, { schema, table });
    const applied = (result.results ?? []).map((r) => ({
      migration: r.migrationName,
      direction: r.direction,
      status: r.status,
    }));
    if (command.json) {
      writeJson(io.stdout, { table: `${schema}.${table}`, applied });
    } else {
      const where = `${schema}.${table} on ${maskConnectionString(command.connection.databaseUrl ?? '')}`;
      if (applied.length === 0) io.stdout.write(`Inbox ${where} is up to date.\n`);
      else io.stdout.write(`Inbox ${where}: applied ${applied.map((a) => a.migration).join(', ')}.\n`);
    }
    return EXIT.ok;
  } finally {
    await database.close();
  }
}
