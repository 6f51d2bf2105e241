// One way to run a package's schema migrations (the inbox's, the outbox's, the HTTP keys'): Kysely's Migrator
// with a bookkeeping table of its own inside the package's schema, retried while the database is starting.

import { Migrator, sql, type Kysely, type MigrationProvider, type MigrationResultSet } from 'kysely';
import { retryDatabaseStart, type DatabaseStartRetryOptions } from './database-start-retry.js';

/** What `runSchemaMigrations` migrates: one provider, bookkept in its own table inside `schema`. */
export interface SchemaMigrationsTarget {
  /** A validated schema name (quoted as given). */
  readonly schema: string;
  /** A validated name of Kysely's bookkeeping table; the lock table is `<migrationTable>_lock`. */
  readonly migrationTable: string;
  readonly provider: MigrationProvider;
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
): Promise<MigrationResultSet> {
  return retryDatabaseStart(retry.what ?? 'runSchemaMigrations', () => migrateOnce(db, target), retry);
}

async function migrateOnce(db: Kysely<unknown>, target: SchemaMigrationsTarget): Promise<MigrationResultSet> {
  await sql.raw(`CREATE SCHEMA IF NOT EXISTS "${target.schema}"`).execute(db);
  const migrator = new Migrator({
    db,
    provider: target.provider,
    migrationTableSchema: target.schema,
    migrationTableName: target.migrationTable,
    migrationLockTableName: `${target.migrationTable}_lock`,
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
