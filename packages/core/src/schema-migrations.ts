// One way to run a package's schema migrations (the inbox's, the outbox's, the HTTP keys'): Kysely's Migrator
// with a bookkeeping table of its own inside the package's schema, retried while the database is starting.

import { sql, type Kysely } from 'kysely';
import { retryDatabaseStart, type DatabaseStartRetryOptions } from './database-start-retry.js';
import type { SchemaMigrationProvider, SchemaMigrationResultSet } from './schema-migration-types.js';

/** What `runSchemaMigrations` migrates: one provider, bookkept in its own table inside `schema`. */
export interface SchemaMigrationsTarget {
  /** A validated schema name (quoted as given). */
  readonly schema: string;
  /** A validated name of Kysely's bookkeeping table; the lock table is `<migrationTable>_lock`. */
  readonly migrationTable: string;
  readonly provider: SchemaMigrationProvider;
}

/**
 * Creates `schema` if needed and runs `provider` to the latest migration with Kysely's `Migrator`. Shared by
 * the inbox, outbox and HTTP-key migrations. While the database cannot be reached, keeps trying as `retry`
 * says (`retryDatabaseStart`; `what` names the caller in logs). Rejects with the migration error, if any.
 */
export async function runSchemaMigrations(
  db: Kysely<unknown>,
  target: SchemaMigrationsTarget,
  retry: DatabaseStartRetryOptions & { readonly what?: string } = {},
): Promise<SchemaMigrationResultSet> {
  return retryDatabaseStart(retry.what ?? 'runSchemaMigrations', () => migrateOnce(db, target), retry);
}

interface MigratorLike {
  migrateToLatest(): Promise<SchemaMigrationResultSet>;
}
type MigratorConstructor = new (props: {
  db: Kysely<unknown>;
  provider: SchemaMigrationProvider;
  migrationTableSchema: string;
  migrationTableName: string;
  migrationLockTableName: string;
  allowUnorderedMigrations: boolean;
}) => MigratorLike;

let migratorClass: Promise<MigratorConstructor> | undefined;

/**
 * Kysely's Migrator from whichever line the application installed: 'kysely/migration' (0.29, where the root
 * export became a type error) or 'kysely' (0.28, which has no such subpath). The specifier is a variable so that
 * TypeScript, compiling against either line's types, does not resolve it.
 */
function loadMigrator(): Promise<MigratorConstructor> {
  migratorClass ??= (async () => {
    const subpath: string = 'kysely/migration';
    const fromSubpath = await import(subpath).then(
      (module: { Migrator?: MigratorConstructor }) => module.Migrator,
      () => undefined,
    );
    if (fromSubpath !== undefined) return fromSubpath;
    const root = (await import('kysely')) as unknown as { Migrator?: MigratorConstructor };
    if (root.Migrator === undefined)
      throw new Error('kysely exports no Migrator (neither kysely/migration nor kysely)');
    return root.Migrator;
  })();
  return migratorClass;
}

async function migrateOnce(
  db: Kysely<unknown>,
  target: SchemaMigrationsTarget,
): Promise<SchemaMigrationResultSet> {
  await sql.raw(`CREATE SCHEMA IF NOT EXISTS "${target.schema}"`).execute(db);
  const Migrator = await loadMigrator();
  const migrator = new Migrator({
    db,
    provider: target.provider,
    migrationTableSchema: target.schema,
    migrationTableName: target.migrationTable,
    migrationLockTableName: `${target.migrationTable}_lock`,
    // A provider's lists may differ by option (the inbox's plain layout has no 0003/0004): an inbox migrated
    // plain up to 0005 and then moved to daily partitions has 0003 and 0004 pending before its last one.
    allowUnorderedMigrations: true,
  });
  // Kysely's Migrator introspects the tables of every schema before it migrates. A concurrent DROP SCHEMA of
  // some other schema (another service's migrations, parallel test files) can then fail that read with
  // "schema … does not exist" although nothing of ours is wrong; nothing was applied, so try again.
  for (let attempt = 1; ; attempt++) {
    const result = await migrator.migrateToLatest();
    if (result.error === undefined) return result;
    if (attempt >= 5 || !isOtherSchemaDropped(result.error, target.schema)) throw result.error;
    await new Promise((resolve) => setTimeout(resolve, 25 * attempt));
  }
}

function isOtherSchemaDropped(error: unknown, ownSchema: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const message = String((error as Error | null)?.message ?? error);
  // A table of another schema dropped during the read (partition maintenance there): "relation "s.t" does not exist".
  const relation = /relation "([^".]+)\.[^"]+" does not exist/.exec(message);
  if (relation !== null) return relation[1] !== ownSchema;
  const match = /schema "([^"]+)" does not exist/.exec(message);
  return (code === '3F000' || match !== null) && match?.[1] !== ownSchema;
}
