// The one source of the outbox schema: the Kysely migrations run these statements, and
// packages/outbox/scripts/generate-sql.ts writes them to migrations/0002_outbox.sql.

import type { OutboxTableNames } from './outbox-table-names.js';

/** The DDL of the outbox table, one statement per entry, idempotent (IF NOT EXISTS). */
export function outboxSchemaStatements(names: OutboxTableNames): string[] {
  const t = names.qualifiedTable;
  return [
    `CREATE SCHEMA IF NOT EXISTS "${names.schema}"`,
    `CREATE TABLE IF NOT EXISTS ${t} (
  seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id             uuid NOT NULL,
  publisher      text COLLATE "C" NOT NULL,
  destination    text NOT NULL,
  routing_key    text,
  partition_key  text COLLATE "C",
  headers        jsonb NOT NULL DEFAULT '{}'::jsonb,
  payload        bytea NOT NULL,
  payload_text   boolean NOT NULL,
  delay_ms       integer,
  created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  available_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  attempts       integer NOT NULL DEFAULT 0,
  last_error     text,
  dispatched_at  timestamptz,
  parked_at      timestamptz
)`,
    // The message id is unique: enqueueing a deterministic id twice (a replayed handler) keeps the first row.
    `CREATE UNIQUE INDEX IF NOT EXISTS ${names.derived('_id_key')} ON ${t} (id)`,
    // The relay's claim: undispatched, unparked rows in seq (= insert) order, and the per-key lookup that keeps
    // a key's rows in order. Ids cannot order: deterministic ids are hashes.
    `CREATE INDEX IF NOT EXISTS ${names.derived('_undispatched_idx')} ON ${t} (seq) WHERE dispatched_at IS NULL AND parked_at IS NULL`,
    `CREATE INDEX IF NOT EXISTS ${names.derived('_key_idx')} ON ${t} (publisher, destination, partition_key, seq) WHERE dispatched_at IS NULL AND parked_at IS NULL`,
    // The pruner's index.
    `CREATE INDEX IF NOT EXISTS ${names.derived('_dispatched_idx')} ON ${t} (dispatched_at) WHERE dispatched_at IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS ${names.derived('_parked_idx')} ON ${t} (parked_at) WHERE parked_at IS NOT NULL`,
  ];
}

/** The DDL that undoes `outboxSchemaStatements` (the schema itself is left in place). */
export function outboxSchemaDownStatements(names: OutboxTableNames): string[] {
  return [`DROP TABLE IF EXISTS ${names.qualifiedTable}`];
}

/** The schema as one plain SQL script. */
export function outboxSchemaSql(names: OutboxTableNames): string {
  return `${outboxSchemaStatements(names).join(';\n\n')};\n`;
}
