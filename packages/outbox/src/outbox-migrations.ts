// The outbox schema as Kysely migrations: a SchemaMigrationProvider for Kysely's Migrator, and migrateOutbox() which
// runs it with its own migration table so it never mixes with the application's (or the inbox's) migrations.

import { sql, type Kysely } from 'kysely';
import type { DatabaseStartRetryOptions } from '@inboxkit/core';
import {
  runSchemaMigrations,
  type SchemaMigration,
  type SchemaMigrationProvider,
  type SchemaMigrationResultSet,
} from '@inboxkit/core/postgres';
import { outboxSchemaDownStatements, outboxSchemaStatements } from './outbox-schema.js';
import { resolveOutboxTableNames, type OutboxTableOptions } from './outbox-table-names.js';

/**
 * The outbox migrations, for Kysely's `Migrator`. Names are prefixed `inboxkit_outbox_` so they can be merged
 * into an application's own provider. Default schema `inboxkit`, table `outbox`.
 *
 * @example
 * const migrator = new Migrator({ db, provider: outboxMigrations({ schema: 'app' }) });
 * await migrator.migrateToLatest();
 */
export function outboxMigrations(options: OutboxTableOptions = {}): SchemaMigrationProvider {
  const names = resolveOutboxTableNames(options);
  const migration: SchemaMigration = {
    async up(db: Kysely<unknown>): Promise<void> {
      for (const statement of outboxSchemaStatements(names)) await sql.raw(statement).execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const statement of outboxSchemaDownStatements(names)) await sql.raw(statement).execute(db);
    },
  };
  return { getMigrations: async () => ({ inboxkit_outbox_0001: migration }) };
}

/** Options of `migrateOutbox`. */
export interface MigrateOutboxOptions extends OutboxTableOptions, DatabaseStartRetryOptions {
  /** Kysely's migration bookkeeping table. Default is `inboxkit_outbox_migrations` (in the outbox schema). */
  readonly migrationTable?: string;
}

/**
 * Brings the outbox schema up to date with Kysely's `Migrator` (safe from several processes at once: the
 * Migrator takes a lock). While the database is down or restarting it keeps trying, as `migrateInbox` does
 * (`DatabaseStartRetryOptions`; default without a time limit). Rejects with the migration error, if any.
 *
 * @example
 * await migrateOutbox(db); // inboxkit.outbox
 */
export async function migrateOutbox<DB>(
  database: Kysely<DB>,
  options: MigrateOutboxOptions = {},
): Promise<SchemaMigrationResultSet> {
  // The migration touches only the outbox table: the application's table types do not matter here.
  const db = database as unknown as Kysely<unknown>;
  const names = resolveOutboxTableNames(options);
  const migrationTable = resolveOutboxTableNames({
    schema: names.schema,
    table: options.migrationTable ?? 'inboxkit_outbox_migrations',
  }).table;
  return runSchemaMigrations(
    db,
    {
      schema: names.schema,
      migrationTable,
      provider: outboxMigrations(options),
    },
    { ...options, what: 'migrateOutbox' },
  );
}
