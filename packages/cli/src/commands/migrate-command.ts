// `inboxkit migrate`: applies core's inbox migrations (the same Kysely Migrator provider applications use),
// so the CLI and the library can never disagree about the schema; with --reconciliation, also the reconciliation
// sweeper's tables, through the same function applications call (`migrateReconciliation`).

import { migrateInbox } from '@inboxkit/core/postgres';
import { migrateReconciliation } from '@inboxkit/core/patterns';
import { sql, type Kysely } from 'kysely';

import type { MigrateCommand } from '../command-line.js';
import { writeJson } from '../output/write-json.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

const RECONCILIATION_TABLES = ['reconciliation_watermarks', 'reconciliation_differences'] as const;

/** Runs `migrate`; returns the exit code. */
export async function runMigrate(command: MigrateCommand, context: CommandContext): Promise<number> {
  const { io } = context;
  const { schema, table } = command.connection;
  const database = await context.services.openDatabase(command.connection);
  try {
    // One attempt: a command typed by hand should say at once that the database cannot be reached.
    const result = await migrateInbox(database.db, { schema, table, layout: command.layout, startTimeoutMs: 0 });
    const applied = (result.results ?? []).map((r) => ({
      migration: r.migrationName,
      direction: r.direction,
      status: r.status,
    }));
    const reconciliation = command.reconciliation
      ? await createReconciliationTables(database.db, schema)
      : undefined;
    if (command.json) {
      writeJson(io.stdout, {
        table: `${schema}.${table}`,
        applied,
        ...(reconciliation === undefined ? {} : { reconciliation }),
      });
    } else {
      const where = `${schema}.${table} on ${maskConnectionString(command.connection.databaseUrl ?? '')}`;
      if (applied.length === 0) io.stdout.write(`Inbox ${where} is up to date.\n`);
      else io.stdout.write(`Inbox ${where}: applied ${applied.map((a) => a.migration).join(', ')}.\n`);
      if (reconciliation !== undefined) {
        io.stdout.write(
          reconciliation.created.length === 0
            ? `Reconciliation tables in ${schema} are up to date.\n`
            : `Reconciliation tables in ${schema}: created ${reconciliation.created.join(', ')}.\n`,
        );
      }
    }
    return EXIT.ok;
  } finally {
    await database.close();
  }
}

/** Creates the sweeper's tables (idempotent) and says which did not exist before. */
async function createReconciliationTables(
  db: Kysely<unknown>,
  schema: string,
): Promise<{ schema: string; created: string[] }> {
  const existing = async (): Promise<Set<string>> => {
    const { rows } = await sql<{ name: string }>`
      SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = ${schema} AND table_name = ANY(${[...RECONCILIATION_TABLES]})`.execute(db);
    return new Set(rows.map((r) => r.name));
  };
  const before = await existing();
  await migrateReconciliation(db, { schema, startTimeoutMs: 0 });
  return { schema, created: RECONCILIATION_TABLES.filter((t) => !before.has(t)) };
}
