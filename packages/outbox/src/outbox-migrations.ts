// The outbox schema as Kysely migrations: a MigrationProvider for Kysely's Migrator, and migrateOutbox() which
// runs it with its own migration table so it never mixes with the application's (or the inbox's) migrations.

import { Migrator, sql, type Kysely, type Migration, type MigrationProvider, type MigrationResultSet } from 'kysely';
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
export function outboxMigrations(options: OutboxTableOptions = {}): MigrationProvider {
  const names = resolveOutboxTableNames(options);
  const migration: Migration = {
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
export interface MigrateOutboxOptions extends OutboxTableOptions {
  /** Kysely's migration bookkeeping table. Default is `inboxkit_outbox_migrations` (in the outbox schema). */
  readonly migrationTable?: string;
}

/**
 * Brings the outbox schema up to date with Kysely's `Migrator` (safe from several processes at once: the
 * Migrator takes a lock). Rejects with the migration error, if any.
 *
 * @example
 * await migrateOutbox(db); // inboxkit.outbox
 */
export async function migrateOutbox<DB>(database: Kysely<DB>, options: MigrateOutboxOptions = {}): Promise<MigrationResultSet> {
  // The migration touches only the outbox table: the application's table types do not matter here.
  const db = database as unknown as Kysely<unknown>;
  const names = resolveOutboxTableNames(options);
  const migrationTable = resolveOutboxTableNames({
    schema: names.schema,
    table: options.migrationTable ?? 'inboxkit_outbox_migrations',
  }).table;
  await sql.raw(`CREATE SCHEMA IF NOT EXISTS "${names.schema}"`).execute(db);
  const migrator = new Migrator({
    db,
    provider: outboxMigrations(options),
    migrationTableSchema: names.schema,
    migrationTableName: migrationTable,
    migrationLockTableName: `${migrationTable}_lock`,
  });
  // Kysely's Migrator introspects the tables of every schema before it migrates. A concurrent DROP SCHEMA of
  // some other schema (another service's migrations, parallel test files) can then fail that read with
  // "schema … does not exist" although nothing of ours is wrong; nothing was applied, so try again (as
  // core's migrateInbox does).
  for (let attempt = 1; ; attempt++) {
    const result = await migrator.migrateToLatest();
    if (result.error === undefined) return result;
    if (attempt >= 5 || !isOtherSchemaDropped(result.error, names.schema)) throw result.error;
    await new Promise((resolve) => setTimeout(resolve, 25 * attempt));
  }
}

function isOtherSchemaDropped(error: unknown, ownSchema: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const match = /schema "([^"]+)" does not exist/.exec(String((error as Error | null)?.message ?? error));
  return (code === '3F000' || match !== null) && match?.[1] !== ownSchema;
}
