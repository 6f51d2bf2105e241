// The key of one inbox row, as the state machine's functions (inbox-sql.ts) spell it in each layout. In `table`
// an id's row is (consumer, message_id). In `daily-partitions` Postgres requires the partition key in the
// primary key, so the row is (consumer, message_id, day), where `day` is the UTC day of the intent's own time
// (`p_day_timestamp`: CloudEvents `time`, the consumer's `dayOf`) or else of the message's timestamp: the same on
// every delivery of the same record, whenever it arrives (arrival time would put a redelivery after midnight in
// the next day, where it would find no row and run again).
//
// A producer that re-publishes one intent as a new record stamped on another day gives it another day. The
// cross-day check (`p_cross_day`, the store's `crossDayCheck`) closes that: before a function on one id looks
// for its row, it takes a transaction-level advisory lock on hash(consumer, id) — so two deliveries of one id
// stamped on different days wait on each other, as two of the same day wait on the row — and then takes the
// day of the row the id already has in any partition, if any. The lock is held to the transaction's end (in
// transactional mode, the handler's commit), so the second finds the first one's row.

import { columnList, DETAIL_COLUMNS, HOT_COLUMNS } from '../inbox-columns.js';
import type { InboxTableNames } from '../inbox-table-names.js';
import { partitionNames } from './partition-names.js';

/** What the functions of one layout say where they name an id's row. */
export interface InboxRowKey {
  /** The primary key's columns: what a claim conflicts on. */
  readonly columns: string;
  /** The `WHERE` of one id's row in a function on one id (`p_consumer`, `p_message_id`, and `v_day`). */
  readonly match: string;
  /** The key's columns in a new row, and their values in a function on one id. */
  readonly insertColumns: string;
  readonly insertValues: string;
  /** Parameters after the common ones of `_claim` and `_fail` (empty in `table`). */
  readonly parameters: string;
  /** Declarations of a function on one id whose message timestamp is `p_message_timestamp`. */
  readonly declareFromTimestamp: string;
  /** Declarations of a function that knows the id's lease token (`p_lease_token`), not its timestamp. */
  readonly declareFromLease: string;
  /** The day's column and value from the timestamp expression `ts`, after `message_id` (empty in `table`). */
  dayColumn(ts: string): { readonly column: string; readonly value: string };
  /** Sets `v_day` from the timestamp expression `ts` (a statement on a line of its own; empty in `table`). */
  setDay(ts: string): string;
  /** The array of message timestamps `_start` is given (`NULL` in `table`, which ignores them). */
  readonly timestamps: string;
  /**
   * The cross-day check of `_start` (`p_message_ids`, `p_message_timestamps`, `p_cross_day`): locks each id,
   * in id order, and replaces the timestamp of an id that has a row on another day by that day's. Empty in
   * `table`.
   */
  readonly crossDayAll: string;
  /**
   * Statements that run before a function on one id looks for its row (`v_day` set): while a populated plain
   * inbox is being moved to partitions, they move the id's row (and details) out of `<table>_legacy` into its
   * day, so it deduplicates as before. Empty in `table`.
   */
  readonly adopt: string;
  /** The same for every id of `_start` (`p_message_ids`, `p_message_timestamps`). Empty in `table`. */
  readonly adoptAll: string;
  /**
   * Statements that take the day of the row the id already has in any partition instead of the timestamp's:
   * with the cross-day check (after its lock), and for a replay (`replay` the replay id parameter, not NULL),
   * which is sent with a new broker timestamp (the replay tool cannot know the producer's) and must still find
   * its row. The id's row on `v_day` is preferred. Empty in `table`.
   */
  crossDay(replay: string): string;
}

/**
 * The day of a message timestamp: its UTC date, or `infinity` for a message without one (those rows live in
 * the partition `<table>_undated`, pruned by batched deletes as in the plain table).
 */
export function dayOf(ts: string): string {
  return `coalesce((${ts} AT TIME ZONE 'UTC')::date, 'infinity'::date)`;
}

const ID = 'consumer = p_consumer AND message_id = p_message_id';

/**
 * The advisory lock key of one id of one consumer. The consumer's length keeps ('a|b', 'c') and ('a', 'b|c')
 * apart; a hash collision (of two ids, or with an application's own advisory lock) only makes two claims wait
 * on each other. The seed sets inboxkit's keys apart from `hashtextextended(text, 0)` of the same text.
 */
function lockKey(consumer: string, id: string): string {
  return `hashtextextended(length(${consumer}) || ':' || ${consumer} || '|' || ${id}, 7306)`;
}

/** The row key of `n.layout`. */
export function inboxRowKey(n: InboxTableNames): InboxRowKey {
  if (n.layout === 'table') {
    return {
      columns: 'consumer, message_id',
      match: ID,
      insertColumns: 'consumer, message_id',
      insertValues: 'p_consumer, p_message_id',
      parameters: '',
      declareFromTimestamp: '',
      declareFromLease: '',
      dayColumn: () => ({ column: '', value: '' }),
      setDay: () => '',
      timestamps: 'NULL::timestamptz[]',
      crossDayAll: '',
      adopt: '',
      adoptAll: '',
      crossDay: () => '',
    };
  }
  const adopt = adoptLegacy(n);
  return {
    columns: 'consumer, message_id, day',
    match: `${ID} AND day = v_day`,
    insertColumns: 'consumer, message_id, day',
    insertValues: 'p_consumer, p_message_id, v_day',
    parameters: ',\n  p_day_timestamp timestamptz, p_cross_day boolean',
    declareFromTimestamp: `\n  v_day date := ${dayOf('coalesce(p_day_timestamp, p_message_timestamp)')};`,
    // Leased mode: the lease's details row knows its day (no lease, no row: the lease was lost).
    declareFromLease: `\n  v_day date := (SELECT day FROM ${n.qualifiedDetailsTable} WHERE ${ID} AND lease_token = p_lease_token LIMIT 1);`,
    dayColumn: (ts) => ({ column: ', day', value: `, ${dayOf(ts)}` }),
    setDay: (ts) => `\n    v_day := ${dayOf(ts)};`,
    timestamps: 'p_message_timestamps',
    adopt: `\n  ${adopt}`,
    crossDay: (replay) => `\n  IF p_cross_day THEN
    PERFORM pg_advisory_xact_lock(${lockKey('p_consumer', 'p_message_id')});
  END IF;
  -- One statement over every day (a probe of each partition's key; one on the own day alone would be planned
  -- anew on each call, which costs more than the probes it saves).
  IF p_cross_day OR ${replay} IS NOT NULL THEN
    v_day := coalesce((SELECT day FROM ${n.qualifiedTable} WHERE ${ID} ORDER BY day = v_day DESC, day DESC LIMIT 1), v_day);
  END IF;`,
    crossDayAll: `\n  IF p_cross_day THEN
    FOR p_message_id IN SELECT DISTINCT id FROM unnest(p_message_ids) AS v(id) ORDER BY id LOOP
      PERFORM pg_advisory_xact_lock(${lockKey('p_consumer', 'p_message_id')});
    END LOOP;
    p_message_timestamps := ARRAY(SELECT coalesce((SELECT x.day::timestamp AT TIME ZONE 'UTC' FROM ${n.qualifiedTable} x
        WHERE x.consumer = p_consumer AND x.message_id = v.id ORDER BY x.day = ${dayOf('v.ts')} DESC, x.day DESC LIMIT 1), v.ts)
      FROM unnest(p_message_ids, p_message_timestamps) WITH ORDINALITY AS v(id, ts, i) ORDER BY v.i);
  END IF;`,
    adoptAll: `\n  FOR p_message_id, v_ts IN SELECT DISTINCT ON (id) id, ts FROM unnest(p_message_ids, p_message_timestamps) AS v(id, ts) ORDER BY id LOOP
    v_day := ${dayOf('v_ts')};
    ${adopt}
  END LOOP;`,
  };
}

/**
 * Moves the id's row and details from the plain tables of a populated inbox being moved to partitions into
 * the partitioned ones, under `v_day`, while those tables exist (the test is a catalog lookup). Concurrent
 * deliveries of the same id queue on the legacy row's delete; the later ones find it gone, and then the
 * partitioned row the first one wrote.
 */
function adoptLegacy(n: InboxTableNames): string {
  const p = partitionNames(n);
  const hot = columnList(HOT_COLUMNS);
  const details = columnList(DETAIL_COLUMNS);
  return `IF to_regclass('${p.qualified(p.legacy)}') IS NOT NULL THEN
    WITH moved AS (DELETE FROM ${p.qualified(p.legacy)} WHERE ${ID} RETURNING *)
    INSERT INTO ${n.qualifiedTable} (consumer, message_id, day, ${hot}) SELECT consumer, message_id, v_day, ${hot} FROM moved
    ON CONFLICT (consumer, message_id, day) DO NOTHING;
    WITH moved AS (DELETE FROM ${p.qualified(p.detailsLegacy)} WHERE ${ID} RETURNING *)
    INSERT INTO ${n.qualifiedDetailsTable} (consumer, message_id, day, ${details}) SELECT consumer, message_id, v_day, ${details} FROM moved
    ON CONFLICT (consumer, message_id, day) DO NOTHING;
    END IF;`;
}
