// The one source of the inbox's tables (DESIGN §3): their DDL, key and columns, a row read as json, and the
// upgrade from version 1. The Kysely migrations run these statements with the functions of inbox-sql.ts, and
// scripts/generate-sql.ts writes the same to migrations/0005_inbox_lean_row.sql. The table DDL and its key are
// here and nowhere else (a partitioned layout starts from them); the columns after the key are inbox-columns.ts'.

import { DETAIL_COLUMNS, detailColumnDefinitions, hotColumnDefinitions } from './inbox-columns.js';
import type { InboxTableNames } from './inbox-table-names.js';
import { inboxRowKey } from './partitions/inbox-row-key.js';

const ms = (t: string): string => `(extract(epoch FROM ${t}) * 1000)::float8`;

/**
 * A row as one json value from a hot row `h` and its details `d` (all NULL when it has none), keyed as the
 * fields of `InboxRowState`, timestamps as epoch milliseconds (inbox-answer.ts reads it back).
 */
export function rowJson(h: string, d: string): string {
  return `json_build_object('consumer', ${h}.consumer, 'messageId', ${h}.message_id, 'status', ${h}.status,
    'fingerprint', ${h}.fingerprint, 'attempts', ${h}.attempts, 'startedAttempts', coalesce(${h}.started_attempts, ${h}.attempts),
    'leaseToken', ${d}.lease_token, 'lockedUntil', ${ms(`${d}.locked_until`)},
    'availableAt', ${ms(`coalesce(${d}.available_at, ${h}.changed_at, 'epoch')`)},
    'receivedAt', ${ms(`coalesce(${d}.received_at, ${h}.changed_at, 'epoch')`)},
    'messageTimestamp', ${ms(`${d}.message_timestamp`)}, 'expiresAt', ${ms(`${h}.expires_at`)},
    'completedAt', CASE WHEN ${h}.status = 'completed' THEN ${ms(`${h}.changed_at`)} END,
    'lastError', ${d}.last_error, 'deadLetterReason', ${d}.dead_letter_reason, 'deadLetteredAt', ${ms(`${d}.dead_lettered_at`)},
    'replayCount', coalesce(${d}.replay_count, 0), 'lastReplayId', ${d}.last_replay_id,
    'firstFailureAt', ${ms(`${d}.first_failure_at`)}, 'lastFailureAt', ${ms(`${d}.last_failure_at`)},
    'claimedFrom', coalesce(${d}.claimed_from, CASE WHEN ${h}.attempts = 0 THEN NULL WHEN ${h}.started_attempts IS NULL THEN 'new' ELSE 'processing' END),
    'availableInMs', ceil(greatest(0, ${ms(`coalesce(${d}.available_at, ${h}.changed_at) - now()`)})),
    'leaseRemainingMs', coalesce(ceil(greatest(0, ${ms(`${d}.locked_until - now()`)})), 0))::text`;
}

/** The inbox's primary key: what a claim conflicts on. */
export const INBOX_KEY = 'consumer, message_id';

/**
 * The hot row: only what the claim, the dedupe decision and expiry need, and no index but its key, because
 * every first delivery writes it. `changed_at` is when the row took its status (for a completed row, its
 * completion); `started_attempts` stays NULL until an attempt is recorded as started.
 */
export function hotTable(n: InboxTableNames): string {
  return `CREATE TABLE IF NOT EXISTS ${n.qualifiedTable} (
  consumer          text COLLATE "C" NOT NULL,
  message_id        text COLLATE "C" NOT NULL,${dayColumn(n)}
${hotColumnDefinitions(18)}
  CONSTRAINT ${n.derived('_pkey')} PRIMARY KEY (${inboxRowKey(n).columns}),
  CONSTRAINT ${n.derived('_status_check')} ${STATUS_CHECK}
)${partitionBy(n)}`;
}

/**
 * The hot row's states (DESIGN §3), with the dead letters an operator retired: `discarded` and `archived`
 * (dead-letter-lifecycle.ts; added to existing inboxes by `inboxkit_0005_dead_letter_lifecycle`).
 */
export const STATUS_CHECK = `CHECK (status IN ('processing', 'failed', 'completed', 'dead_lettered', 'discarded', 'archived'))`;

/** The partitioned layout's key column, the UTC day of the message's timestamp (partitions/inbox-row-key.ts). */
function dayColumn(n: InboxTableNames): string {
  return n.layout === 'table' ? '' : '\n  day               date NOT NULL,';
}

function partitionBy(n: InboxTableNames): string {
  return n.layout === 'table' ? '' : ' PARTITION BY RANGE (day)';
}

/** What only failures, dead letters, leases and replays write: one row per id that took such a path. */
export function detailsTable(n: InboxTableNames): string {
  return `CREATE TABLE IF NOT EXISTS ${n.qualifiedDetailsTable} (
  consumer            text COLLATE "C" NOT NULL,
  message_id          text COLLATE "C" NOT NULL,${dayColumn(n)}
${detailColumnDefinitions(20)}
  CONSTRAINT ${n.derived('_details_pkey')} PRIMARY KEY (${inboxRowKey(n).columns})
)${partitionBy(n)}`;
}

/**
 * The upgrade of a version-1 inbox (migrations/0001_inbox.sql: one wide row with two indexes). An empty one
 * is dropped and created anew below. A populated one is converted in place, without copying it: the rare-path
 * columns of the rows that have any go to the details table, then those columns and both indexes are dropped
 * (dropped columns cost nothing but a wider tuple header in rows written before a rewrite), and `completed_at`
 * becomes `changed_at`. Completed rows keep their key, fingerprint and expiry: they still deduplicate.
 */
function fromVersion1(n: InboxTableNames): string {
  const t = n.qualifiedTable;
  const moved = DETAIL_COLUMNS.filter((c) => c !== 'replay_count').join(', ');
  return `DO $inboxkit$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('${t}') AND attname = 'last_error' AND NOT attisdropped) THEN
    LOCK TABLE ${t} IN ACCESS EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT 1 FROM ${t}) THEN
      DROP TABLE ${t};
    ELSE
      INSERT INTO ${n.qualifiedDetailsTable} (consumer, message_id, replay_count, ${moved})
      SELECT consumer, message_id, replay_count, ${moved} FROM ${t}
      WHERE status <> 'completed' OR last_error IS NOT NULL OR replay_count > 0 OR last_replay_id IS NOT NULL
        OR claimed_from IS DISTINCT FROM 'new'
      ON CONFLICT (${INBOX_KEY}) DO NOTHING;
      DROP INDEX IF EXISTS ${n.qualified('_expires_at_idx')}, ${n.qualified('_open_idx')};
      ALTER TABLE ${t} RENAME COLUMN completed_at TO changed_at;
      ALTER TABLE ${t} ${[...DETAIL_COLUMNS, 'result'].map((c) => `DROP COLUMN ${c}`).join(', ')},
        ALTER COLUMN changed_at SET DEFAULT now(), ALTER COLUMN started_attempts DROP DEFAULT,
        ALTER COLUMN started_attempts DROP NOT NULL;
    END IF;
  END IF;
END
$inboxkit$`;
}

/** The tables and indexes (the functions are inbox-sql.ts'), idempotent, a version-1 inbox upgraded first. */
export function inboxTableStatements(n: InboxTableNames): string[] {
  const r = n.qualifiedReplayTable;
  return [
    `CREATE SCHEMA IF NOT EXISTS "${n.schema}"`,
    detailsTable(n),
    fromVersion1(n),
    hotTable(n),
    // The pruner's: a BRIN index is a few pages per million rows and costs a first delivery nothing (the new
    // pages at the table's end are not summarized until VACUUM reaches them).
    `CREATE INDEX IF NOT EXISTS ${n.derived('_expires_at_idx')} ON ${n.qualifiedTable} USING brin (expires_at)`,
    // Operators' list of dead letters, newest first, without reading the completed majority.
    `CREATE INDEX IF NOT EXISTS ${n.derived('_details_dead_idx')} ON ${n.qualifiedDetailsTable} (dead_lettered_at) WHERE dead_lettered_at IS NOT NULL`,
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
    `CREATE INDEX IF NOT EXISTS ${n.derived('_replays_message_idx')} ON ${r} (consumer, message_id)`,
    `CREATE INDEX IF NOT EXISTS ${n.derived('_replays_replay_idx')} ON ${r} (replay_id)`,
  ];
}

/** The DDL that drops the tables. */
export function inboxTablesDown(n: InboxTableNames): string[] {
  return [
    `DROP TABLE IF EXISTS ${n.qualifiedReplayTable}`,
    `DROP TABLE IF EXISTS ${n.qualifiedDetailsTable}`,
    `DROP TABLE IF EXISTS ${n.qualifiedTable}`,
  ];
}
