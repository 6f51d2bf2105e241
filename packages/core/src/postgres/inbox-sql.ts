// The inbox's state machine in SQL (DESIGN §3), reviewable in one place: the claim, the batch claim, a failure's
// record, a lease's completion and the count of started attempts, each a PL/pgSQL function the migration creates
// beside the tables — so every driver sends the same one statement, Postgres keeps each function's plans per
// session without PREPARE, and a claim decides every case in one round trip — and the statements that call them.
//
// The hot row (`<table>`) is what every first delivery writes: status, fingerprint, attempts and expiry. What
// only failures, dead letters, leases and replays write lives in `<table>_details`, one row per id that took
// such a path; a row's fields are the hot row's with its details. A transaction writes a details row only while
// it holds its hot row (inserted, or locked), so reading the details after locking the hot row reads them current.
//
//   (none) ─claim─► completed (transactional: the commit is the completion) ─expires_at─► pruned
//          ─claim─► processing (leased; or counted as started) ─complete─► completed
//   failed / processing (lease expired or none) / dead_lettered (replay) ─claim─► the same as a new row
//   claimed ─fail─► failed (retry after a delay) or dead_lettered; a claim beyond max attempts ─► dead_lettered

import type { ClaimRequest, ClaimSettings, FailureRecord } from '../store.js';
import { DETAIL_COLUMNS, HOT_COLUMNS } from './inbox-columns.js';
import { rowJson } from './inbox-schema.js';
import type { InboxTableNames } from './inbox-table-names.js';
import { inboxRowKey, type InboxRowKey } from './partitions/inbox-row-key.js';
import type { SqlStatement } from './sql-seam.js';

/**
 * The claimable rule, the one place it is written: a failed row whose retry time passed, a processing row
 * without a live lease, or a dead-lettered row under a replay id it has not seen — and only with the payload
 * first recorded (`fp` NULL: any payload).
 */
function claimable(h: string, d: string, fp: string, replay: string): string {
  return `((${h}.fingerprint IS NULL OR ${fp} IS NULL OR ${h}.fingerprint = ${fp}) AND (
      (${h}.status = 'failed' AND coalesce(${d}.available_at, '-infinity') <= now())
   OR (${h}.status = 'processing' AND coalesce(${d}.locked_until, '-infinity') <= now())
   OR (${h}.status = 'dead_lettered' AND ${replay} IS NOT NULL AND ${replay} IS DISTINCT FROM ${d}.last_replay_id)))`;
}

/** The columns of a new hot row, and their values from `status`, `fp`, `attempts` (the one insert of a new row). */
function newRow(k: InboxRowKey, status: string, fp: string, attempts: string): { readonly columns: string; readonly values: string } {
  return {
    columns: `${k.insertColumns}, status, fingerprint, attempts, changed_at, expires_at`,
    values: `${k.insertValues}, ${status}, ${fp}, ${attempts}, now(), now() + make_interval(secs => p_window_ms / 1000)`,
  };
}

/** The hot row's and details' writes from the record variables `h` and `d` of a function on one id. */
function writes(n: InboxTableNames, k: InboxRowKey): { readonly hot: string; readonly details: string } {
  const value = (c: string): string =>
    c === 'received_at' ? 'coalesce(d.received_at, now())' : c === 'replay_count' ? 'coalesce(d.replay_count, 0)' : `d.${c}`;
  // Every hot column from the record, three to a line.
  const set = HOT_COLUMNS.map((c) => `${c} = h.${c}`);
  const lines = [0, 3].map((at) => set.slice(at, at + 3).join(', ')).filter((line) => line !== '');
  return {
    hot: `UPDATE ${n.qualifiedTable} SET ${lines.join(',\n      ')}
    WHERE ${k.match}`,
    details: `INSERT INTO ${n.qualifiedDetailsTable} (${k.insertColumns}, ${DETAIL_COLUMNS.join(', ')})
    VALUES (${k.insertValues}, ${DETAIL_COLUMNS.map(value).join(', ')})
    ON CONFLICT (${k.columns}) DO UPDATE SET ${DETAIL_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', ')}`,
  };
}

function fn(name: string, parameters: string, returns: string, declare: string, body: string): string {
  return `CREATE OR REPLACE FUNCTION ${name}(${parameters})
RETURNS ${returns} LANGUAGE plpgsql VOLATILE AS $inboxkit$
#variable_conflict use_column
DECLARE${declare}
BEGIN${body}
END
$inboxkit$`;
}

/** The functions of one inbox, for the migration (`CREATE OR REPLACE`, so it can run again). */
export function inboxFunctions(n: InboxTableNames): string[] {
  const t = n.qualifiedTable;
  const dt = n.qualifiedDetailsTable;
  const k = inboxRowKey(n);
  const KEY = k.match;
  const w = writes(n, k);
  const rowVars = `\n  h ${t}%ROWTYPE;\n  d ${dt}%ROWTYPE;`;
  const fresh = newRow(k, 'v_status', 'p_fingerprint', 'v_first');
  const exhausted = newRow(k, `'dead_lettered'`, 'p_fingerprint', 'v_first - 1');
  // The answer: `c<attempt> <claimed from>` claimed, `d` a plain duplicate (completed with this payload),
  // `x<row json>` dead-lettered now (beyond max attempts), `s<row json>` not claimable, NULL contended.
  const claim = fn(
    n.qualified('_claim'),
    `p_consumer text, p_message_id text, p_fingerprint text, p_message_timestamp timestamptz, p_deliveries int,
  p_replay_id text, p_max_attempts int, p_window_ms float8, p_lock_timeout text, p_lease_token uuid, p_lease_ms float8${k.parameters}`,
    'text',
    `
  v_setting text := set_config('lock_timeout', p_lock_timeout, true);
  v_first int := greatest(1, p_deliveries);
  v_status text := CASE WHEN p_lease_token IS NULL THEN 'completed' ELSE 'processing' END;
  v_attempts int;
  v_next int;
  v_from text;${k.declareFromTimestamp}${rowVars}`,
    `${k.crossDay('p_replay_id')}${k.adopt}
  FOR v_try IN 1..3 LOOP
    IF v_first <= p_max_attempts THEN
      INSERT INTO ${t} (${fresh.columns}) VALUES (${fresh.values})
      ON CONFLICT (${k.columns}) DO NOTHING
      RETURNING attempts INTO v_attempts;
      IF v_attempts IS NOT NULL THEN
        IF p_lease_token IS NOT NULL THEN
          d.lease_token := p_lease_token;
          d.locked_until := now() + make_interval(secs => p_lease_ms / 1000);
          d.message_timestamp := p_message_timestamp;
          d.available_at := now();
          d.claimed_from := 'new';
          ${w.details};
        END IF;
        RETURN 'c' || v_attempts || ' new';
      END IF;
    END IF;
    -- The id has a row: maybe one a concurrent delivery committed while the insert waited, which this read
    -- (a statement of its own, with its own snapshot) sees. Or the broker's count alone is beyond max attempts.
    SELECT * INTO h FROM ${t} WHERE ${KEY};
    EXIT WHEN FOUND;
    IF v_first > p_max_attempts THEN
      INSERT INTO ${t} (${exhausted.columns}, started_attempts) VALUES (${exhausted.values}, v_first)
      ON CONFLICT (${k.columns}) DO NOTHING
      RETURNING * INTO h;
      IF h.consumer IS NOT NULL THEN
        d.message_timestamp := p_message_timestamp;
        d.available_at := now();
        d.dead_letter_reason := 'max-attempts';
        d.dead_lettered_at := now();
        d.last_replay_id := p_replay_id;
        d.claimed_from := 'new';
        ${w.details};
        RETURN 'x' || ${rowJson('h', 'd')};
      END IF;
    END IF;
  END LOOP;
  IF h.consumer IS NULL THEN
    RETURN NULL;
  END IF;
  IF h.status = 'completed' AND (h.fingerprint IS NULL OR h.fingerprint = p_fingerprint) THEN
    RETURN 'd';
  END IF;
  SELECT * INTO d FROM ${dt} WHERE ${KEY};
  IF NOT ${claimable('h', 'd', 'p_fingerprint', 'p_replay_id')} THEN
    RETURN 's' || ${rowJson('h', 'd')};
  END IF;
  -- Claimable as read: lock the row (a concurrent claim may be taking it), then read both again.
  SELECT * INTO h FROM ${t} WHERE ${KEY} FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  SELECT * INTO d FROM ${dt} WHERE ${KEY};
  IF NOT ${claimable('h', 'd', 'p_fingerprint', 'p_replay_id')} THEN
    RETURN 's' || ${rowJson('h', 'd')};
  END IF;
  -- A replay starts the count again; otherwise max(attempts + 1, started attempts, the broker's count).
  v_next := CASE WHEN h.status = 'dead_lettered' THEN v_first
    ELSE greatest(h.attempts + 1, coalesce(h.started_attempts, 0), v_first) END;
  v_from := CASE WHEN h.status = 'processing' AND d.lease_token IS NOT NULL THEN 'lease-expired' ELSE h.status END;
  IF h.status = 'dead_lettered' THEN
    d.replay_count := coalesce(d.replay_count, 0) + 1;
    d.last_replay_id := p_replay_id;
    d.first_failure_at := NULL;
    d.last_failure_at := NULL;
  END IF;
  d.received_at := coalesce(d.received_at, h.changed_at);
  d.message_timestamp := coalesce(d.message_timestamp, p_message_timestamp);
  d.available_at := now();
  d.lease_token := p_lease_token;
  d.locked_until := now() + make_interval(secs => p_lease_ms / 1000);
  d.claimed_from := v_from;
  h.fingerprint := coalesce(h.fingerprint, p_fingerprint);
  h.started_attempts := v_next;
  h.changed_at := now();
  IF v_next > p_max_attempts THEN
    -- Not run: dead-lettered (max-attempts) here, in the claim's transaction.
    h.status := 'dead_lettered';
    h.attempts := v_next - 1;
    d.dead_letter_reason := 'max-attempts';
    d.dead_lettered_at := now();
    ${w.hot};
    ${w.details};
    RETURN 'x' || ${rowJson('h', 'd')};
  END IF;
  h.status := v_status;
  h.attempts := v_next;
  h.expires_at := now() + make_interval(secs => p_window_ms / 1000);
  d.dead_letter_reason := NULL;
  d.dead_lettered_at := NULL;
  ${w.hot};
  -- A started attempt taken over (no lease, no details yet) needs no details row.
  IF d.consumer IS NOT NULL OR p_lease_token IS NOT NULL OR v_from <> 'processing' THEN
    ${w.details};
  END IF;
  RETURN 'c' || v_next || ' ' || v_from;`,
  );
  // A failed attempt, in its own short transaction: `failed` (retry after the delay) or `dead_lettered`; never
  // over a row completed or dead-lettered meanwhile, and in leased mode only while the lease holds. `p_claimed`:
  // inside the batch transaction that claimed the row. Answers `w<row>` written, `n<row>` (or `n`) not.
  const fail = fn(
    n.qualified('_fail'),
    `p_consumer text, p_message_id text, p_fingerprint text, p_message_timestamp timestamptz, p_attempt int,
  p_error jsonb, p_reason text, p_delay_ms float8, p_window_ms float8, p_lease_token uuid, p_reopened_by text,
  p_claimed boolean${k.parameters}`,
    'text',
    `
  v_status text := CASE WHEN p_reason IS NULL THEN 'failed' ELSE 'dead_lettered' END;
  v_reopen boolean := false;${k.declareFromTimestamp}${rowVars}`,
    `${k.crossDay('p_reopened_by')}${k.adopt}
  IF p_lease_token IS NULL AND NOT p_claimed THEN
    INSERT INTO ${t} (${fresh.columns}) VALUES (${newRow(k, 'v_status', 'p_fingerprint', 'p_attempt').values})
    ON CONFLICT (${k.columns}) DO NOTHING
    RETURNING * INTO h;
  END IF;
  IF h.consumer IS NOT NULL THEN
    d.last_replay_id := p_reopened_by;
    d.claimed_from := 'new';
  ELSE
    SELECT * INTO h FROM ${t} WHERE ${KEY} FOR UPDATE;
    IF NOT FOUND THEN
      RETURN 'n';
    END IF;
    SELECT * INTO d FROM ${dt} WHERE ${KEY};
    -- A transactional attempt that had reopened a dead letter: its claim rolled back, so reopen it here.
    v_reopen := p_reopened_by IS NOT NULL AND h.status = 'dead_lettered';
    IF NOT (p_claimed
        OR (p_lease_token IS NOT NULL AND h.status = 'processing' AND d.lease_token = p_lease_token)
        OR (p_lease_token IS NULL AND (h.fingerprint IS NULL OR h.fingerprint = p_fingerprint)
          AND (h.status IN ('failed', 'processing') OR (v_reopen AND d.last_replay_id IS DISTINCT FROM p_reopened_by)))) THEN
      RETURN 'n' || ${rowJson('h', 'd')};
    END IF;
    d.received_at := coalesce(d.received_at, h.changed_at);
    h.started_attempts := CASE WHEN v_reopen OR p_claimed THEN p_attempt ELSE greatest(coalesce(h.started_attempts, h.attempts), p_attempt) END;
    h.attempts := CASE WHEN v_reopen OR p_claimed THEN p_attempt ELSE greatest(h.attempts, p_attempt) END;
    h.status := v_status;
    h.fingerprint := coalesce(h.fingerprint, p_fingerprint);
    h.changed_at := now();
    ${w.hot};
  END IF;
  d.message_timestamp := coalesce(d.message_timestamp, p_message_timestamp);
  d.available_at := CASE WHEN p_reason IS NULL THEN now() + make_interval(secs => p_delay_ms / 1000) ELSE now() END;
  d.last_error := p_error;
  d.dead_letter_reason := p_reason;
  d.dead_lettered_at := CASE WHEN p_reason IS NULL THEN NULL ELSE now() END;
  d.first_failure_at := CASE WHEN v_reopen THEN now() ELSE coalesce(d.first_failure_at, now()) END;
  d.last_failure_at := now();
  d.lease_token := NULL;
  d.locked_until := NULL;
  IF v_reopen THEN
    d.replay_count := coalesce(d.replay_count, 0) + 1;
    d.last_replay_id := p_reopened_by;
    d.claimed_from := 'dead_lettered';
  END IF;
  ${w.details};
  RETURN 'w' || ${rowJson('h', 'd')};`,
  );
  // Leased mode: completes the row if `p_lease_token` still holds its lease (fencing), else answers false.
  const complete = fn(
    n.qualified('_complete_lease'),
    'p_consumer text, p_message_id text, p_lease_token uuid, p_window_ms float8',
    'boolean',
    `${k.declareFromLease}${rowVars}`,
    `
  SELECT * INTO h FROM ${t} WHERE ${KEY} FOR UPDATE;
  IF NOT FOUND OR h.status <> 'processing' THEN
    RETURN false;
  END IF;
  SELECT * INTO d FROM ${dt} WHERE ${KEY};
  IF d.lease_token IS DISTINCT FROM p_lease_token THEN
    RETURN false;
  END IF;
  UPDATE ${t} SET status = 'completed', changed_at = now(), expires_at = now() + make_interval(secs => p_window_ms / 1000)
  WHERE ${KEY};
  UPDATE ${dt} SET lease_token = NULL, locked_until = NULL WHERE ${KEY};
  RETURN true;`,
  );
  // Counts an attempt as started for each id a claim could take now (a new id gets a `processing` row).
  const start = fn(
    n.qualified('_start'),
    `p_consumer text, p_message_ids text[], p_window_ms float8${n.layout === 'table' ? '' : ', p_message_timestamps timestamptz[], p_cross_day boolean'}`,
    'void',
    `
  v_new text[];
  v_day date;
  v_ts timestamptz;
  p_message_id text;${rowVars}`,
    `${k.crossDayAll}${k.adoptAll}
  WITH inserted AS (
    INSERT INTO ${t} AS t (consumer, message_id${k.dayColumn('ts').column}, status, attempts, started_attempts, changed_at, expires_at)
    SELECT p_consumer, id${k.dayColumn('ts').value}, 'processing', 0, 1, now(), now() + make_interval(secs => p_window_ms / 1000)
    FROM (SELECT DISTINCT ON (id) id, ts FROM unnest(p_message_ids, ${k.timestamps}) AS v(id, ts) ORDER BY id) AS ids ORDER BY id
    ON CONFLICT (${k.columns}) DO NOTHING
    RETURNING t.message_id)
  SELECT coalesce(array_agg(message_id), '{}') INTO v_new FROM inserted;
  FOR p_message_id, v_ts IN SELECT DISTINCT ON (id) id, ts FROM unnest(p_message_ids, ${k.timestamps}) AS v(id, ts) WHERE id <> ALL (v_new) ORDER BY id LOOP${k.setDay('v_ts')}
    SELECT * INTO h FROM ${t} WHERE ${KEY};
    SELECT * INTO d FROM ${dt} WHERE ${KEY};
    CONTINUE WHEN NOT ${claimable('h', 'd', 'NULL::text', 'NULL::text')};
    SELECT * INTO h FROM ${t} WHERE ${KEY} FOR UPDATE;
    SELECT * INTO d FROM ${dt} WHERE ${KEY};
    CONTINUE WHEN NOT ${claimable('h', 'd', 'NULL::text', 'NULL::text')};
    UPDATE ${t} SET started_attempts = greatest(coalesce(started_attempts, attempts), attempts) + 1 WHERE ${KEY};
  END LOOP;`,
  );
  return [claim, fail, complete, start];
}

/** The DDL that drops the functions. */
export function inboxFunctionsDown(n: InboxTableNames): string[] {
  return ['_claim', '_fail', '_complete_lease', '_start'].map((s) => `DROP FUNCTION IF EXISTS ${n.qualified(s)}`);
}

/** Options of `InboxSql` beyond the table names. */
export interface InboxSqlOptions {
  /** The partitioned layout's cross-day check (`InboxStoreOptions.crossDayCheck`). Default is true. */
  readonly crossDayCheck?: boolean;
}

/** The calls the store sends: `SELECT <function>($1::type, …)`, each answering one column. */
export class InboxSql {
  readonly #n: InboxTableNames;
  readonly #crossDay: boolean;

  constructor(names: InboxTableNames, options: InboxSqlOptions = {}) {
    this.#n = names;
    this.#crossDay = options.crossDayCheck ?? true;
  }

  /** Each call's text, built once: it depends only on the function, its types and the alias (not the values). */
  readonly #texts = new Map<string, string>();

  #call(fn: string, types: string, parameters: unknown[], as = ' AS answer'): SqlStatement {
    const key = `${fn} ${types}${as}`;
    let text = this.#texts.get(key);
    if (text === undefined) {
      const casts = types.split(' ').map((type, i) => `$${i + 1}::${type}`);
      text = `SELECT ${this.#n.qualified(fn)}(${casts.join(', ')})${as}`;
      this.#texts.set(key, text);
    }
    return { sql: text, parameters };
  }

  /** The partitioned layout's parameters after the common ones: the intent's time and the cross-day check. */
  #dayParameters(intentTime: Date | undefined): { readonly types: string; readonly values: unknown[] } {
    if (this.#n.layout === 'table') return { types: '', values: [] };
    return { types: ' timestamptz boolean', values: [intentTime ?? null, this.#crossDay] };
  }

  /**
   * One delivery's claim (`lease` in leased mode): one row, `answer`. `asBatch`: in a batch claim's shape, one
   * row of `message_id` (empty) and `answer`.
   */
  claim(s: ClaimSettings, r: ClaimRequest, lease?: { readonly token: string; readonly ms: number }, asBatch = false): SqlStatement {
    const day = this.#dayParameters(r.intentTime);
    const call = this.#call('_claim', `text text text timestamptz int text int float8 text uuid float8${day.types}`, [
      s.consumer, r.messageId, r.fingerprint, r.messageTimestamp ?? null, r.deliveryCount, r.replayId ?? null,
      s.maxAttempts, s.dedupeWindowMs, lockTimeout(s), lease?.token ?? null, lease?.ms ?? null, ...day.values,
    ]);
    return asBatch ? { ...call, sql: `SELECT ''::text AS message_id, answer FROM (${call.sql}) AS claim` } : call;
  }

  /**
   * A batch's claim (distinct ids): the claim of each id, in id order (so concurrent batches wait on each other's
   * rows in one order), in one statement. Rows of `message_id` and `answer`.
   */
  claimBatch(s: ClaimSettings, rs: readonly ClaimRequest[]): SqlStatement {
    const parameters: unknown[] = [
      s.consumer, rs.map((r) => r.messageId), rs.map((r) => r.fingerprint), rs.map((r) => r.messageTimestamp ?? null),
      rs.map((r) => r.deliveryCount), rs.map((r) => r.replayId ?? null), s.maxAttempts, s.dedupeWindowMs, lockTimeout(s),
    ];
    const table = this.#n.layout === 'table';
    if (!table) parameters.push(rs.map((r) => r.intentTime ?? null), this.#crossDay);
    const [day, dayColumn, dayArgument] = table ? ['', '', ''] : [', $10::timestamptz[]', ', day', ', v.day, $11::boolean'];
    return {
      sql: `SELECT v.id AS message_id, ${this.#n.qualified('_claim')}($1::text, v.id, v.fp, v.ts, v.n, v.replay, $7::int, $8::float8, $9::text, NULL, NULL${dayArgument}) AS answer
FROM (SELECT * FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::int[], $6::text[]${day}) AS v(id, fp, ts, n, replay${dayColumn}) ORDER BY id OFFSET 0) AS v`,
      parameters,
    };
  }

  /** A failed attempt's record; `claimed` inside the batch transaction that claimed it. One row: `answer`. */
  fail(s: ClaimSettings, f: FailureRecord, claimed = false): SqlStatement {
    // jsonb refuses the \u0000 escape: NUL goes before serialising.
    const error = JSON.stringify(f.error, (_k, v: unknown) => (typeof v === 'string' ? v.replaceAll('\u0000', '\uFFFD') : v));
    const day = this.#dayParameters(f.intentTime);
    return this.#call('_fail', `text text text timestamptz int jsonb text float8 float8 uuid text boolean${day.types}`, [
      s.consumer, f.messageId, f.fingerprint, f.messageTimestamp ?? null, f.attempt, error, f.deadLetterReason ?? null,
      Math.max(0, Math.round(f.retryDelayMs)), s.dedupeWindowMs, f.leaseToken, f.reopenedBy ?? null, claimed, ...day.values,
    ]);
  }

  /** Leased mode: one row, `completed` true when the lease still held. */
  completeLease(s: ClaimSettings, messageId: string, leaseToken: string): SqlStatement {
    return this.#call('_complete_lease', 'text text uuid float8', [s.consumer, messageId, leaseToken, s.dedupeWindowMs], ' AS completed');
  }

  /** `timestamps`: each id's time, in order, that gives its day in the partitioned layout (intent's, or message's). */
  recordAttemptsStarted(s: ClaimSettings, ids: readonly string[], timestamps: readonly (Date | undefined)[] = []): SqlStatement {
    if (this.#n.layout === 'table') return this.#call('_start', 'text text[] float8', [s.consumer, ids, s.dedupeWindowMs], '');
    const ts = ids.map((_id, i) => timestamps[i] ?? null);
    return this.#call('_start', 'text text[] float8 timestamptz[] boolean', [s.consumer, ids, s.dedupeWindowMs, ts, this.#crossDay], '');
  }
}

function lockTimeout(s: ClaimSettings): string {
  return String(Math.max(1, Math.round(s.lockTimeoutMs)));
}
