// The CLI's own connection to the inbox database: a small pg pool behind Kysely, created from the URL the
// operator gave. (Libraries take the application's client; the CLI is the application here.)

import { ConfigurationError } from '@inboxkit/core';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

import type { OpenedDatabase } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { maskSecretsIn, maskUrl } from '../settings/mask-url.js';

/**
 * Opens a pool of at most 2 connections to `settings.databaseUrl` and checks it answers, so a wrong URL
 * stops a command at once (exit 3) instead of surfacing as unreadable inbox rows later.
 */
export async function openDatabase(settings: ConnectionSettings): Promise<OpenedDatabase> {
  if (settings.databaseUrl === undefined) {
    throw new ConfigurationError(
      'no database configured: pass --database-url postgres://… or set DATABASE_URL',
    );
  }
  const pool = new pg.Pool({
    connectionString: settings.databaseUrl,
    max: 2,
    connectionTimeoutMillis: 10_000,
    application_name: 'inboxkit-cli',
  });
  // An idle client's error (server restart) must not crash the CLI; the next query reports it.
  pool.on('error', () => undefined);
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  try {
    await sql`select 1`.execute(db);
  } catch (error) {
    await db.destroy().catch(() => undefined);
    const message = maskSecretsIn(error instanceof Error ? error.message || error.name : String(error), [
      settings.databaseUrl,
    ]);
    throw new ConfigurationError(`cannot reach Postgres at ${maskUrl(settings.databaseUrl)}: ${message}`, {
      cause: error,
    });
  }
  return {
    db: db as OpenedDatabase['db'],
    close: () => db.destroy(),
  };
}
