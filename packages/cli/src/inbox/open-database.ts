// The CLI's own connection to the inbox database: a small pg pool behind Kysely, created from the URL the
// operator gave. (Libraries take the application's client; the CLI is the application here.)

import { ConfigurationError } from '@inboxkit/core';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

import type { OpenedDatabase } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import { pgConnectionConfig } from '../settings/pg-connection-config.js';
import { SecretScrubber } from '../settings/secret-scrubber.js';

/**
 * Opens a pool of at most 2 connections to `settings.databaseUrl` (a URL or a libpq key/value string) and
 * checks it answers, so a wrong URL stops a command at once (exit 3) instead of surfacing as unreadable inbox
 * rows later. Errors show the connection with its secrets masked.
 */
export async function openDatabase(settings: ConnectionSettings): Promise<OpenedDatabase> {
  if (settings.databaseUrl === undefined) {
    throw new ConfigurationError(
      'no database configured: pass --database-url postgres://… or set DATABASE_URL',
    );
  }
  const pool = new pg.Pool({
    max: 2,
    connectionTimeoutMillis: 10_000,
    application_name: 'inboxkit-cli',
    ...pgConnectionConfig(settings.databaseUrl),
  });
  // An idle client's error (server restart) must not crash the CLI; the next query reports it.
  pool.on('error', () => undefined);
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  try {
    await sql`select 1`.execute(db);
  } catch (error) {
    await db.destroy().catch(() => undefined);
    const message = new SecretScrubber()
      .addConnectionString(settings.databaseUrl)
      .scrub(error instanceof Error ? error.message || error.name : String(error));
    throw new ConfigurationError(
      `cannot reach Postgres at ${maskConnectionString(settings.databaseUrl)}: ${message}`,
      { cause: error },
    );
  }
  return {
    db: db as OpenedDatabase['db'],
    close: () => db.destroy(),
  };
}
