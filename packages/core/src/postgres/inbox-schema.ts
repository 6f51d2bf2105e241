// The one source of the inbox schema (DESIGN §3): the Kysely migrations run these statements, and
// scripts/generate-sql.ts writes them to migrations/0001_inbox.sql for teams with their own migration tool.

import type { InboxTableNames } from './inbox-table-names.js';

/** The DDL of the inbox and replay audit tables, one statement per entry, idempotent (IF NOT EXISTS). */
export function inboxSchemaStatements(names: InboxTableNames): string[] {
  const t = names.qualifiedTable;
  const r = names.qualifiedReplayTable;
  return [
    `CREATE SCHEMA IF NOT EXISTS "${names.schema}"`,
    `CREATE TABLE IF NOT EXISTS ${t} (
  consumer            text COLLATE "C" NOT NULL,
  message_id          text COLLATE "C" NOT NULL,
  status              text NOT NULL,
  fingerprint         text,
  attempts            integer NOT NULL DEFAULT 0,
  started_attempts    integer NOT NULL DEFAULT 0,
  lease_token         uuid,
  locked_until        timestamptz,
  available_at        timestamptz NOT NULL DEFAULT now(),
  received_at         timestamptz NOT NULL DEFAULT now(),
  message_timestamp   timestamptz,
  completed_at        timestamptz,
  expires_at          timestamptz NOT NULL,
  last_error          jsonb,
  dead_letter_reason  text,
  dead_lettered_at    timestamptz,
  replay_count        integer NOT NULL DEFAULT 0,
  last_replay_id      text,
  first_failure_at    timestamptz,
  last_failure_at     timestamptz,
  claimed_from        text,
  result              jsonb,
  CONSTRAINT ${names.derived('_pkey')} PRIMARY KEY (consumer, message_id),
  CONSTRAINT ${names.derived('_status_check')} CHECK (status IN ('processing', 'failed', 'completed', 'dead_lettered'))
)`,
    // The pruner's index: only completed rows are ever pruned by age.
    `CREATE INDEX IF NOT EXISTS ${names.derived('_expires_at_idx')} ON ${t} (expires_at) WHERE status = 'completed'`,
    // Operators' views (dead letters, stuck processing) without scanning the completed majority.
    `CREATE INDEX IF NOT EXISTS ${names.derived('_open_idx')} ON ${t} (consumer, status, received_at) WHERE status <> 'completed'`,
    `CREATE TABLE IF NOT EXISTS ${r} (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  replay_id     text NOT NULL,
  consumer      text COLLATE "C" NOT NULL,
  message_id    text COLLATE "C" NOT NULL,
  requested_by  text,
  requested_at  timestamptz,
  at            timestamptz NOT NULL DEFAULT now(),
  outcome       text NOT NULL
)`,
    `CREATE INDEX IF NOT EXISTS ${names.derived('_replays_message_idx')} ON ${r} (consumer, message_id)`,
    `CREATE INDEX IF NOT EXISTS ${names.derived('_replays_replay_idx')} ON ${r} (replay_id)`,
  ];
}

/** The DDL that undoes `inboxSchemaStatements` (the schema itself is left in place). */
export function inboxSchemaDownStatements(names: InboxTableNames): string[] {
  return [`DROP TABLE IF EXISTS ${names.qualifiedReplayTable}`, `DROP TABLE IF EXISTS ${names.qualifiedTable}`];
}

/** The schema as one plain SQL script. */
export function inboxSchemaSql(names: InboxTableNames): string {
  return `${inboxSchemaStatements(names).join(';\n\n')};\n`;
}
