// The partitioned inbox's DDL (layout `daily-partitions`): the hot table and its details range-partitioned by
// day (their columns and key come from inbox-schema.ts, with `day`), the fixed partitions, the indexes, and two
// functions that add and drop a day — the one place partitions are made and dropped, called by
// `maintainInboxPartitions`, the CLI and anyone's own scheduler (`SELECT inboxkit.inbox_add_partition(…)`).
//
// A day is dropped only when it is wholly older than the dedupe window (its last instant + window ≤ now) and no
// completed row in it is still inside its own window (a message first received days after it was stamped keeps
// its day until it expires). Rows still `processing`, `failed` or `dead_lettered` survive the drop: they are
// moved, under the same lock, into the default partition, where a redelivery still finds them (the day has no
// partition any more, so Postgres routes its key there) and the batched pruner deletes them once completed and
// expired. A day made later for rows that came early (stamped ahead of the partitions made so far) takes them
// out of the default partition as it is attached.

import { columnList, DETAIL_COLUMNS, HOT_COLUMNS } from '../inbox-columns.js';
import { detailsTable, hotTable } from '../inbox-schema.js';
import type { InboxTableNames } from '../inbox-table-names.js';
import { dayOf } from './inbox-row-key.js';
import { partitionNames } from './partition-names.js';

/** The statements that create the partitioned tables, their partitions and indexes (idempotent). */
export function partitionedTableStatements(n: InboxTableNames): string[] {
  const p = partitionNames(n);
  const t = n.qualifiedTable;
  const dt = n.qualifiedDetailsTable;
  return [
    `CREATE SCHEMA IF NOT EXISTS "${n.schema}"`,
    fromTable(n),
    hotTable(n),
    detailsTable(n),
    `CREATE TABLE IF NOT EXISTS ${p.qualified(p.undated)} PARTITION OF ${t} FOR VALUES FROM ('infinity') TO (MAXVALUE)`,
    `CREATE TABLE IF NOT EXISTS ${p.qualified(p.detailsUndated)} PARTITION OF ${dt} FOR VALUES FROM ('infinity') TO (MAXVALUE)`,
    `CREATE TABLE IF NOT EXISTS ${p.qualified(p.defaultPartition)} PARTITION OF ${t} DEFAULT`,
    `CREATE TABLE IF NOT EXISTS ${p.qualified(p.detailsDefault)} PARTITION OF ${dt} DEFAULT`,
    // The batched pruner's, as in the plain table; it only reads the undated and default partitions.
    `CREATE INDEX IF NOT EXISTS ${n.derived('_expires_at_idx')} ON ${t} USING brin (expires_at)`,
    // What a drop must move out, found without reading the completed majority; a transactional first delivery
    // writes `completed`, which this partial index leaves out, so it costs that path nothing but the test.
    `CREATE INDEX IF NOT EXISTS ${n.derived('_open_rows_idx')} ON ${t} (status) WHERE status <> 'completed'`,
    `CREATE INDEX IF NOT EXISTS ${n.derived('_details_dead_idx')} ON ${dt} (dead_lettered_at) WHERE dead_lettered_at IS NOT NULL`,
    // Whether a day about to be made has rows waiting in the default partition.
    `CREATE INDEX IF NOT EXISTS ${n.derived('_default_day_idx')} ON ${p.qualified(p.defaultPartition)} (day)`,
  ];
}

/**
 * The plain tables (layout `table`, made by the lean-row migration that runs first) give way to the partitioned
 * ones. Empty ones are dropped. Populated ones are renamed `<table>_legacy` and `<table>_details_legacy` (a
 * metadata change, whatever their size): their rows carry no message timestamp, so no day can be given them
 * now; instead each delivery of an id moves its row into its day first (inbox-row-key.ts), and maintenance
 * drops the legacy tables once every completed row in them expired (`<table>_retire_legacy`).
 */
function fromTable(n: InboxTableNames): string {
  const p = partitionNames(n);
  const t = n.qualifiedTable;
  const dt = n.qualifiedDetailsTable;
  return `DO $inboxkit$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass('${t}') AND relkind = 'r') THEN
    LOCK TABLE ${t}, ${dt} IN ACCESS EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT 1 FROM ${t}) AND NOT EXISTS (SELECT 1 FROM ${dt}) THEN
      DROP TABLE ${t}, ${dt};
    ELSIF to_regclass('${p.qualified(p.legacy)}') IS NOT NULL THEN
      RAISE EXCEPTION 'inboxkit: % holds rows and % still exists from an earlier move: let partition maintenance retire it first', '${t}', '${p.qualified(p.legacy)}';
    ELSE
      DROP INDEX IF EXISTS ${n.qualified('_expires_at_idx')}, ${n.qualified('_details_dead_idx')};
      ALTER TABLE ${t} RENAME CONSTRAINT "${n.table}_pkey" TO "${p.legacy}_pkey";
      ALTER TABLE ${dt} RENAME CONSTRAINT "${n.detailsTable}_pkey" TO "${p.detailsLegacy}_pkey";
      ALTER TABLE ${t} RENAME TO "${p.legacy}";
      ALTER TABLE ${dt} RENAME TO "${p.detailsLegacy}";
    END IF;
  END IF;
END
$inboxkit$`;
}

/** The functions that add and drop a day's partitions (`CREATE OR REPLACE`). */
export function partitionFunctions(n: InboxTableNames): string[] {
  const p = partitionNames(n);
  const t = n.qualifiedTable;
  const dt = n.qualifiedDetailsTable;
  // The schema as a quoted identifier inside a literal, so a copy of the SQL file edited to another schema
  // (replacing "inboxkit") changes it here too.
  const schema = `'"${n.schema}"'`;
  // `<table>_add_partition(day)`: 'exists', or 'created:<rows moved in from the default partition>'.
  const add = `CREATE OR REPLACE FUNCTION ${n.qualified('_add_partition')}(p_day date)
RETURNS text LANGUAGE plpgsql VOLATILE AS $inboxkit$
DECLARE
  v_hot text := '${p.dayPrefix}' || to_char(p_day, 'YYYYMMDD');
  v_details text := '${p.detailsDayPrefix}' || to_char(p_day, 'YYYYMMDD');
  v_bounds text := format('FOR VALUES FROM (%L) TO (%L)', p_day, p_day + 1);
  v_moved bigint := 0;
BEGIN
  IF p_day IS NULL OR NOT isfinite(p_day) THEN
    RAISE EXCEPTION 'inboxkit: a day partition needs a finite day, got %', p_day;
  END IF;
  IF to_regclass(format('%s.%I', ${schema}, v_hot)) IS NOT NULL THEN
    RETURN 'exists';
  END IF;
  -- Rows of this day that came before it wait in the default partitions: hold those still while they move.
  IF EXISTS (SELECT 1 FROM ${p.qualified(p.defaultPartition)} WHERE day = p_day) THEN
    LOCK TABLE ${p.qualified(p.defaultPartition)}, ${p.qualified(p.detailsDefault)} IN ACCESS EXCLUSIVE MODE;
  END IF;
  EXECUTE format('CREATE TABLE %s.%I (LIKE ${t} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', ${schema}, v_hot);
  EXECUTE format('WITH m AS (DELETE FROM ${p.qualified(p.defaultPartition)} WHERE day = %L RETURNING *) INSERT INTO %s.%I SELECT * FROM m', p_day, ${schema}, v_hot);
  GET DIAGNOSTICS v_moved = ROW_COUNT;
  EXECUTE format('CREATE TABLE %s.%I (LIKE ${dt} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', ${schema}, v_details);
  EXECUTE format('WITH m AS (DELETE FROM ${p.qualified(p.detailsDefault)} WHERE day = %L RETURNING *) INSERT INTO %s.%I SELECT * FROM m', p_day, ${schema}, v_details);
  EXECUTE format('ALTER TABLE ${t} ATTACH PARTITION %s.%I %s', ${schema}, v_hot, v_bounds);
  EXECUTE format('ALTER TABLE ${dt} ATTACH PARTITION %s.%I %s', ${schema}, v_details, v_bounds);
  RETURN 'created:' || v_moved;
END
$inboxkit$`;
  // `<table>_drop_partition(day, window ms)`: 'absent', 'within-window', 'unexpired' (a completed row in it is
  // still inside its window: kept), or 'dropped:<open rows moved to the default partition>'.
  const unexpired = `format('SELECT EXISTS (SELECT 1 FROM %s.%I WHERE status = %L AND expires_at > now())', ${schema}, v_hot, 'completed')`;
  const drop = `CREATE OR REPLACE FUNCTION ${n.qualified('_drop_partition')}(p_day date, p_window_ms float8)
RETURNS text LANGUAGE plpgsql VOLATILE AS $inboxkit$
DECLARE
  v_hot text := '${p.dayPrefix}' || to_char(p_day, 'YYYYMMDD');
  v_details text := '${p.detailsDayPrefix}' || to_char(p_day, 'YYYYMMDD');
  v_unexpired boolean;
  v_moved bigint := 0;
BEGIN
  IF p_window_ms IS NULL OR p_window_ms <= 0 THEN
    RAISE EXCEPTION 'inboxkit: the dedupe window must be positive, got %', p_window_ms;
  END IF;
  IF to_regclass(format('%s.%I', ${schema}, v_hot)) IS NULL THEN
    RETURN 'absent';
  END IF;
  IF ((p_day + 1)::timestamp AT TIME ZONE 'UTC') + make_interval(secs => p_window_ms / 1000) > now() THEN
    RETURN 'within-window';
  END IF;
  -- Asked first without the lock, so a day kept by its rows costs no exclusive lock; asked again under it.
  EXECUTE ${unexpired} INTO v_unexpired;
  IF v_unexpired THEN
    RETURN 'unexpired';
  END IF;
  LOCK TABLE ${t}, ${dt} IN ACCESS EXCLUSIVE MODE;
  EXECUTE ${unexpired} INTO v_unexpired;
  IF v_unexpired THEN
    RETURN 'unexpired';
  END IF;
  EXECUTE format('ALTER TABLE ${t} DETACH PARTITION %s.%I', ${schema}, v_hot);
  EXECUTE format('ALTER TABLE ${dt} DETACH PARTITION %s.%I', ${schema}, v_details);
  -- Open rows survive: their day has no partition now, so they land in the default one.
  EXECUTE format('INSERT INTO ${t} SELECT * FROM %s.%I WHERE status <> %L', ${schema}, v_hot, 'completed');
  GET DIAGNOSTICS v_moved = ROW_COUNT;
  EXECUTE format('INSERT INTO ${dt} SELECT d.* FROM %s.%I d JOIN %s.%I h USING (consumer, message_id, day) WHERE h.status <> %L',
    ${schema}, v_details, ${schema}, v_hot, 'completed');
  EXECUTE format('DROP TABLE %s.%I, %s.%I', ${schema}, v_hot, ${schema}, v_details);
  RETURN 'dropped:' || v_moved;
END
$inboxkit$`;
  return [add, drop, retireLegacy(n)];
}

/**
 * `<table>_retire_legacy()`: once no completed row of `<table>_legacy` is inside its window, moves its open
 * rows (failed, dead-lettered, processing) into the partitioned tables — under the day of their recorded
 * message timestamp, or undated — and drops the legacy tables. 'absent', 'unexpired' (kept), or
 * 'retired:<rows moved>'.
 */
function retireLegacy(n: InboxTableNames): string {
  const p = partitionNames(n);
  const legacy = p.qualified(p.legacy);
  const detailsLegacy = p.qualified(p.detailsLegacy);
  const hot = columnList(HOT_COLUMNS);
  const details = columnList(DETAIL_COLUMNS);
  const unexpired = `EXISTS (SELECT 1 FROM ${legacy} WHERE status = 'completed' AND expires_at > now())`;
  return `CREATE OR REPLACE FUNCTION ${n.qualified('_retire_legacy')}()
RETURNS text LANGUAGE plpgsql VOLATILE AS $inboxkit$
DECLARE
  v_moved bigint := 0;
BEGIN
  IF to_regclass('${legacy}') IS NULL THEN
    RETURN 'absent';
  END IF;
  IF ${unexpired} THEN
    RETURN 'unexpired';
  END IF;
  LOCK TABLE ${legacy}, ${detailsLegacy} IN ACCESS EXCLUSIVE MODE;
  IF ${unexpired} THEN
    RETURN 'unexpired';
  END IF;
  CREATE TEMPORARY TABLE inboxkit_retired ON COMMIT DROP AS
    SELECT h.consumer, h.message_id, ${dayOf('d.message_timestamp')} AS day FROM ${legacy} h
    LEFT JOIN ${detailsLegacy} d ON d.consumer = h.consumer AND d.message_id = h.message_id WHERE h.status <> 'completed';
  INSERT INTO ${n.qualifiedTable} (consumer, message_id, day, ${hot})
    SELECT h.consumer, h.message_id, r.day, ${columnList(HOT_COLUMNS, 'h')} FROM ${legacy} h JOIN inboxkit_retired r USING (consumer, message_id)
    ON CONFLICT (consumer, message_id, day) DO NOTHING;
  GET DIAGNOSTICS v_moved = ROW_COUNT;
  INSERT INTO ${n.qualifiedDetailsTable} (consumer, message_id, day, ${details})
    SELECT d.consumer, d.message_id, r.day, ${columnList(DETAIL_COLUMNS, 'd')} FROM ${detailsLegacy} d JOIN inboxkit_retired r USING (consumer, message_id)
    ON CONFLICT (consumer, message_id, day) DO NOTHING;
  DROP TABLE ${legacy}, ${detailsLegacy};
  RETURN 'retired:' || v_moved;
END
$inboxkit$`;
}

/** The DDL that drops the partition functions. */
export function partitionFunctionsDown(n: InboxTableNames): string[] {
  return ['_add_partition', '_drop_partition', '_retire_legacy'].map((s) => `DROP FUNCTION IF EXISTS ${n.qualified(s)}`);
}

/**
 * The days a new partitioned inbox starts with: the past week (a backlog being caught up) to three days ahead,
 * on the database's UTC clock. `maintainInboxPartitions` keeps them going.
 */
export function initialPartitions(n: InboxTableNames): string {
  return `SELECT ${n.qualified('_add_partition')}(d::date)
FROM generate_series((now() AT TIME ZONE 'UTC')::date - 7, (now() AT TIME ZONE 'UTC')::date + 3, interval '1 day') AS d`;
}
