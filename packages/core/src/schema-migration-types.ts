// The shapes of a schema migration, written here rather than imported from Kysely: Kysely 0.29 moved its
// `Migrator`, `Migration`, `MigrationProvider` and `MigrationResultSet` from 'kysely' to 'kysely/migration'
// (the old names in 'kysely' became type errors), while 0.28 has no 'kysely/migration'. inboxkit supports both
// lines, so its public signatures name these structural types, which both lines' Migrator accepts and returns.
import type { Kysely } from 'kysely';

/** One migration: Kysely's `Migration` shape. */
export interface SchemaMigration {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kysely's own Migration takes Kysely<any>
  up(db: Kysely<any>): Promise<void>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
  down?(db: Kysely<any>): Promise<void>;
}

/**
 * A set of migrations by name, in Kysely's `MigrationProvider` shape: pass it to Kysely's `Migrator` (from
 * 'kysely' on 0.28, 'kysely/migration' on 0.29) to run inboxkit's schema with your own migrations.
 *
 * @example
 * import { Migrator } from 'kysely/migration'; // kysely 0.29; from 'kysely' on 0.28
 * const migrator = new Migrator({ db, provider: inboxMigrations({ schema: 'app' }) });
 */
export interface SchemaMigrationProvider {
  getMigrations(): Promise<Record<string, SchemaMigration>>;
}

/** One migration's result, as Kysely's `Migrator` reports it. */
export interface SchemaMigrationResult {
  readonly migrationName: string;
  readonly direction: 'Up' | 'Down';
  readonly status: 'Success' | 'Error' | 'NotExecuted';
}

/** What a migration run returns: Kysely's `MigrationResultSet` shape. */
export interface SchemaMigrationResultSet {
  readonly error?: unknown;
  readonly results?: readonly SchemaMigrationResult[];
}
