// The idempotency-key table as a Kysely migration provider of its own, and migrateIdempotencyKeys() which runs
// it with its own migration table, so it never mixes with the inbox's or the application's migrations.

import { sql, type Kysely } from 'kysely';
import type { DatabaseStartRetryOptions } from '@inboxkit/core';
import {
  runSchemaMigrations,
  type SchemaMigration,
  type SchemaMigrationProvider,
  type SchemaMigrationResultSet,
} from '@inboxkit/core/postgres';
import {
  idempotencyKeySchemaDownStatements,
  idempotencyKeySchemaStatements,
} from './idempotency-key-schema.js';
import {
  resolveIdempotencyKeyTableNames,
  type IdempotencyKeyTableOptions,
} from './idempotency-key-table-names.js';

/**
 * The idempotency-key migrations, for Kysely's `Migrator` (names prefixed `inboxkit_http_`). Default schema
 * `inboxkit`, table `idempotency_key`.
 *
 * @example
 * const migrator = new Migrator({ db, provider: idempotencyKeyMigrations({ schema: 'app' }) });
 */
export function idempotencyKeyMigrations(options: IdempotencyKeyTableOptions = {}): SchemaMigrationProvider {
  const names = resolveIdempotencyKeyTableNames(options);
  const migration: SchemaMigration = {
    async up(db: Kysely<unknown>): Promise<void> {
      for (const statement of idempotencyKeySchemaStatements(names)) await sql.raw(statement).execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const statement of idempotencyKeySchemaDownStatements(names)) await sql.raw(statement).execute(db);
    },
  };
  return { getMigrations: async () => ({ inboxkit_http_0003_idempotency_key: migration }) };
}

/** Options of `migrateIdempotencyKeys`. */
export interface MigrateIdempotencyKeysOptions extends IdempotencyKeyTableOptions, DatabaseStartRetryOptions {
  /** Kysely's migration bookkeeping table. Default is `inboxkit_http_migrations` (in the same schema). */
  readonly migrationTable?: string;
}

/**
 * Brings the idempotency-key table up to date (safe from several processes at once: the Migrator takes a
 * lock). While the database is down or restarting it keeps trying, as `migrateInbox` does
 * (`DatabaseStartRetryOptions`; default without a time limit). Rejects with the migration error, if any.
 *
 * @example
 * await migrateIdempotencyKeys(db); // inboxkit.idempotency_key
 */
export async function migrateIdempotencyKeys<DB>(
  database: Kysely<DB>,
  options: MigrateIdempotencyKeysOptions = {},
): Promise<SchemaMigrationResultSet> {
  const db = database as unknown as Kysely<unknown>;
  const names = resolveIdempotencyKeyTableNames(options);
  const migrationTable = resolveIdempotencyKeyTableNames({
    schema: names.schema,
    table: options.migrationTable ?? 'inboxkit_http_migrations',
  }).table;
  return runSchemaMigrations(
    db,
    {
      schema: names.schema,
      migrationTable,
      provider: idempotencyKeyMigrations(options),
    },
    { ...options, what: 'migrateIdempotencyKeys' },
  );
}
