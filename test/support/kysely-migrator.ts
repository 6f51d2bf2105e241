// Kysely's Migrator and NO_MIGRATIONS from whichever line is installed: 'kysely/migration' on 0.29 (where the
// root names became type errors), 'kysely' on 0.28 (no such subpath). Tests that drive a Migrator themselves
// import from here so the suite runs on both lines (CI runs core, http and outbox on kysely 0.29 too). Typed
// by the slice the tests use, which both lines' Migrator has.
import type { Kysely } from 'kysely';
import type { SchemaMigrationProvider, SchemaMigrationResultSet } from '@inboxkit/core/postgres';

interface MigratorSlice {
  migrateToLatest(): Promise<SchemaMigrationResultSet>;
  migrateTo(target: string | typeof NO_MIGRATIONS): Promise<SchemaMigrationResultSet>;
  migrateDown(): Promise<SchemaMigrationResultSet>;
}
type MigratorConstructor = new (props: {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kysely's Migrator takes Kysely<any>
  db: Kysely<any>;
  provider: SchemaMigrationProvider;
  migrationTableSchema?: string;
  migrationTableName?: string;
  migrationLockTableName?: string;
}) => MigratorSlice;
interface MigrationModule {
  Migrator: MigratorConstructor;
  NO_MIGRATIONS: { readonly __noMigrations__: true };
}

const subpath: string = 'kysely/migration';
const root: string = 'kysely';
const module = ((await import(subpath).catch(() => undefined)) ?? (await import(root))) as MigrationModule;

export const Migrator: MigratorConstructor = module.Migrator;
export const NO_MIGRATIONS: MigrationModule['NO_MIGRATIONS'] = module.NO_MIGRATIONS;
