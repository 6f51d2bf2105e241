// The inbox schema as Kysely migrations: a SchemaMigrationProvider for Kysely's Migrator, and migrateInbox() which
// runs it with its own migration table so it never mixes with the application's migrations.

import { sql, type Kysely } from 'kysely';
import type { DatabaseStartRetryOptions } from '../database-start-retry.js';
import type { SchemaMigration, SchemaMigrationProvider, SchemaMigrationResultSet } from '../schema-migration-types.js';
import { runSchemaMigrations } from '../schema-migrations.js';
import { inboxTablesDown, inboxTableStatements } from './inbox-schema.js';
import { inboxFunctions, inboxFunctionsDown } from './inbox-sql.js';
import { deadLetterLifecycleDownStatements, deadLetterLifecycleStatements } from './dead-letter-lifecycle.js';
import { resolveInboxTableNames, type InboxTableNames, type InboxTableOptions } from './inbox-table-names.js';
import {
  initialPartitions,
  partitionedTableStatements,
  partitionFunctions,
  partitionFunctionsDown,
} from './partitions/partitioned-schema.js';

/**
 * The DDL of the inbox (the hot table, its details, the replay audit, the functions), one statement per entry,
 * idempotent: it creates the inbox, upgrades a version-1 inbox, and leaves a current one as it is. For the
 * layout `daily-partitions`, the DDL that runs after it: the plain tables (empty) become partitioned ones, with
 * the days from a week ago to three days ahead.
 */
export function inboxSchemaStatements(n: InboxTableNames): string[] {
  if (n.layout === 'table') return [...inboxTableStatements(n), ...inboxFunctions(n)];
  return [
    ...partitionedTableStatements(n),
    ...partitionedInboxFunctions(n),
    ...partitionFunctions(n),
    initialPartitions(n),
  ];
}

/**
 * The partitioned layout's `_claim`, `_fail` and `_start`, which take more parameters than the plain layout's
 * (the intent's time, the cross-day check): the plain layout's, and those of the partitioned layout before the
 * cross-day check, are dropped first, so each name has one function.
 */
function partitionedInboxFunctions(n: InboxTableNames): string[] {
  const claim = 'text, text, text, timestamptz, int, text, int, float8, text, uuid, float8';
  const fail = 'text, text, text, timestamptz, int, jsonb, text, float8, float8, uuid, text, boolean';
  return [
    `DROP FUNCTION IF EXISTS ${n.qualified('_claim')}(${claim})`,
    `DROP FUNCTION IF EXISTS ${n.qualified('_fail')}(${fail})`,
    `DROP FUNCTION IF EXISTS ${n.qualified('_start')}(text, text[], float8)`,
    `DROP FUNCTION IF EXISTS ${n.qualified('_start')}(text, text[], float8, timestamptz[])`,
    ...inboxFunctions(n),
  ];
}

/** The DDL that undoes `inboxSchemaStatements` (the schema itself is left in place). */
export function inboxSchemaDownStatements(n: InboxTableNames): string[] {
  return [...inboxFunctionsDown(n), ...(n.layout === 'table' ? [] : partitionFunctionsDown(n)), ...inboxTablesDown(n)];
}

/** The schema as one plain SQL script. */
export function inboxSchemaSql(n: InboxTableNames): string {
  return `${inboxSchemaStatements(n).join(';\n\n')};\n`;
}

/**
 * The inbox migrations, for Kysely's `Migrator`. Names are prefixed `inboxkit_` so they can be merged into an
 * application's own provider; the simplest is `migrateInbox`, which keeps them in a migration table of their own.
 * Default schema `inboxkit`, table `inbox`. `inboxkit_0002_lean_row` upgrades a version-1 inbox in place; with
 * `layout: 'daily-partitions'`, `inboxkit_0003_daily_partitions` makes the (empty) plain tables partitioned and
 * `inboxkit_0004_partition_cross_day` brings their functions to the intent's day and the cross-day check;
 * `inboxkit_0005_dead_letter_lifecycle` (both layouts) lets a row be `discarded` or `archived`.
 *
 * @example
 * const migrator = new Migrator({ db, provider: inboxMigrations({ schema: 'app', table: 'inbox' }) });
 * await migrator.migrateToLatest();
 */
export function inboxMigrations(options: InboxTableOptions = {}): SchemaMigrationProvider {
  const names = resolveInboxTableNames({ ...options, layout: 'table' });
  // Version 1 (one wide row, two indexes) was created by `inboxkit_0001_inbox`. Migration 0002 creates the
  // current schema or upgrades a version-1 one in place (inbox-schema.ts), so on a new database 0001 has nothing
  // left to do; it stays listed because databases that ran it remember its name.
  const v1: SchemaMigration = { up: async () => {} };
  const leanRow: SchemaMigration = {
    async up(db: Kysely<unknown>): Promise<void> {
      for (const statement of inboxSchemaStatements(names)) await sql.raw(statement).execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const statement of inboxSchemaDownStatements(names)) await sql.raw(statement).execute(db);
    },
  };
  // Dead letters an operator discarded or archived (dead-letter-lifecycle.ts): a wider status check, on the
  // plain table or the partitioned one (where it reaches every partition). A new inbox already has it (0002
  // and 0003 create the current tables); this brings an existing one to it.
  const lifecycle = (n: InboxTableNames): SchemaMigration => ({
    async up(db: Kysely<unknown>): Promise<void> {
      for (const statement of deadLetterLifecycleStatements(n)) await sql.raw(statement).execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const statement of deadLetterLifecycleDownStatements(n)) await sql.raw(statement).execute(db);
    },
  });
  if (options.layout !== 'daily-partitions') {
    return {
      getMigrations: async () => ({
        inboxkit_0001_inbox: v1,
        inboxkit_0002_lean_row: leanRow,
        inboxkit_0005_dead_letter_lifecycle: lifecycle(names),
      }),
    };
  }
  // The partitioned layout starts from the plain one (empty, or refused when populated: see docs/operations.md).
  const partitioned = resolveInboxTableNames(options);
  const dailyPartitions: SchemaMigration = {
    async up(db: Kysely<unknown>): Promise<void> {
      for (const statement of inboxSchemaStatements(partitioned)) await sql.raw(statement).execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const statement of inboxSchemaDownStatements(partitioned)) await sql.raw(statement).execute(db);
      for (const statement of inboxSchemaStatements(names)) await sql.raw(statement).execute(db);
    },
  };
  // An inbox partitioned before the cross-day check gets the functions that take the intent's time and do it.
  // Going down, 0003's down drops every function by name, whichever version it is.
  const crossDay: SchemaMigration = {
    async up(db: Kysely<unknown>): Promise<void> {
      for (const statement of partitionedInboxFunctions(partitioned)) await sql.raw(statement).execute(db);
    },
    async down(): Promise<void> {},
  };
  return {
    getMigrations: async () => ({
      inboxkit_0001_inbox: v1,
      inboxkit_0002_lean_row: leanRow,
      inboxkit_0003_daily_partitions: dailyPartitions,
      inboxkit_0004_partition_cross_day: crossDay,
      inboxkit_0005_dead_letter_lifecycle: lifecycle(partitioned),
    }),
  };
}

/**
 * Options of `migrateInbox`. While the database cannot be reached it keeps trying (`startTimeoutMs`,
 * `startRetry`, `logger`, `signal`: see `DatabaseStartRetryOptions`).
 */
export interface MigrateInboxOptions extends InboxTableOptions, DatabaseStartRetryOptions {
  /** Kysely's migration bookkeeping table. Default is `inboxkit_migrations` (in the inbox schema). */
  readonly migrationTable?: string;
}

/**
 * Brings the inbox schema up to date with Kysely's `Migrator` (safe to run from several processes at once: the
 * Migrator takes a lock). While the database is down or restarting it keeps trying, as the consumers' start()
 * does (default: without a time limit; `startTimeoutMs` bounds it). Rejects with the migration error, if any.
 *
 * @example
 * await migrateInbox(db); // inboxkit.inbox and inboxkit.inbox_replays
 * await migrateInbox(db, { startTimeoutMs: 120_000, logger }); // a StartTimeoutError after two minutes down
 */
export async function migrateInbox<DB>(
  database: Kysely<DB>,
  options: MigrateInboxOptions = {},
): Promise<SchemaMigrationResultSet> {
  // The migrations touch only the inbox tables: the application's table types do not matter here.
  const db = database as unknown as Kysely<unknown>;
  const names = resolveInboxTableNames(options);
  const migrationTable = resolveInboxTableNames({
    schema: names.schema,
    table: options.migrationTable ?? 'inboxkit_migrations',
  }).table;
  return runSchemaMigrations(
    db,
    { schema: names.schema, migrationTable, provider: inboxMigrations(options) },
    { ...options, what: 'migrateInbox' },
  );
}
