// The idempotency-key table as SQL statements: the one source of the Kysely migration and of
// migrations/0003_http.sql. States mirror the inbox's: processing (with a lease) → completed, or → released.
// recovery_points holds the results of a multi-step handler's completed phases, so a retry resumes after them.

import type { InboxTableNames } from '@inboxkit/core/postgres';

/**
 * The statements that create the idempotency-key table and its expiry index (each idempotent).
 *
 * @example
 * for (const s of idempotencyKeySchemaStatements(resolveIdempotencyKeyTableNames())) await pool.query(s);
 */
export function idempotencyKeySchemaStatements(names: InboxTableNames): string[] {
  const t = names.qualifiedTable;
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
  principal text NOT NULL,
  method text NOT NULL,
  route text NOT NULL,
  idempotency_key text NOT NULL,
  fingerprint text NOT NULL,
  status text NOT NULL CHECK (status IN ('processing', 'completed', 'released')),
  lease_token uuid,
  locked_until timestamptz,
  attempts integer NOT NULL DEFAULT 1,
  response_status integer,
  response_headers jsonb,
  response_body bytea,
  recovery_points jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  expires_at timestamptz NOT NULL,
  CONSTRAINT ${names.derived('_pkey')} PRIMARY KEY (principal, method, route, idempotency_key)
)`,
    `CREATE INDEX IF NOT EXISTS ${names.derived('_expires_at_idx')} ON ${t} (expires_at)`,
  ];
}

/** The statements that drop the table again (the migration's `down`). */
export function idempotencyKeySchemaDownStatements(names: InboxTableNames): string[] {
  return [`DROP TABLE IF EXISTS ${names.qualifiedTable}`];
}

/** The schema as one SQL text, for teams that run their own migration tool. */
export function idempotencyKeySchemaSql(names: InboxTableNames): string {
  return [`CREATE SCHEMA IF NOT EXISTS "${names.schema}"`, ...idempotencyKeySchemaStatements(names)]
    .map((s) => `${s};\n`)
    .join('\n');
}
