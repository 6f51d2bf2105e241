// Every SQL statement PostgresInboxStore sends, in one place, rendered with literals (see sql-literal.ts).
// The claim is one INSERT … ON CONFLICT … DO UPDATE … WHERE <claimable> RETURNING, never select-then-insert.

import { createHash } from 'node:crypto';
import type { ClaimRequest, ClaimSettings, FailureRecord, PruneOptions, ReplayAuditEntry } from '../store.js';
import type { InboxTableNames } from './inbox-table-names.js';
import {
  sqlInt,
  sqlJson,
  sqlMillis,
  sqlText,
  sqlTextArray,
  sqlTimestamp,
  sqlUuid,
} from './sql-literal.js';

const COLUMNS = [
  'consumer',
  'message_id',
  'status',
  'fingerprint',
  'attempts',
  'started_attempts',
  'locked_until',
  'available_at',
  'received_at',
  'message_timestamp',
  'completed_at',
  'expires_at',
  'last_error',
  'dead_letter_reason',
  'dead_lettered_at',
  'replay_count',
  'last_replay_id',
  'first_failure_at',
  'last_failure_at',
  'claimed_from',
] as const;

const TIMESTAMP_COLUMNS: ReadonlySet<string> = new Set([
  'locked_until',
  'available_at',
  'received_at',
  'message_timestamp',
  'completed_at',
  'expires_at',
  'dead_lettered_at',
  'first_failure_at',
  'last_failure_at',
]);

/** The columns of a row (optionally qualified by `alias`), and the two waits computed on the database clock. */
function rowColumns(alias?: string): string {
  const p = alias === undefined ? '' : `${alias}.`;
  return [
    ...COLUMNS.map((c) => `${p}${c}`),
    `${p}lease_token::text AS lease_token`,
    `greatest(0, extract(epoch FROM (${p}available_at - now())) * 1000)::float8 AS available_in_ms`,
    `CASE WHEN ${p}locked_until IS NULL THEN 0 ELSE greatest(0, extract(epoch FROM (${p}locked_until - now())) * 1000)::float8 END AS lease_remaining_ms`,
  ].join(', ');
}

const ROW = rowColumns();
const ROW_X = rowColumns('x');

/**
 * A row as one json value (one column to parse instead of two dozen): what a claim reports about a row it did
 * not take, or dead-lettered.
 */
function stateJson(a: 't' | 'x'): string {
  return a === 't' ? STATE_JSON_T : STATE_JSON_X;
}

function buildStateJson(a: string): string {
  // Timestamps as epoch milliseconds: cheaper to format here and to parse in JS than timestamptz text.
  const pairs = [
    ...COLUMNS.map((c) =>
      TIMESTAMP_COLUMNS.has(c) ? `'${c}', (extract(epoch FROM ${a}.${c}) * 1000)::float8` : `'${c}', ${a}.${c}`,
    ),
    `'lease_token', ${a}.lease_token`,
  ];
  return `json_build_object(${pairs.join(', ')},
    'available_in_ms', greatest(0, extract(epoch FROM (${a}.available_at - now())) * 1000)::float8,
    'lease_remaining_ms', CASE WHEN ${a}.locked_until IS NULL THEN 0
      ELSE greatest(0, extract(epoch FROM (${a}.locked_until - now())) * 1000)::float8 END)`;
}

const STATE_JSON_T = buildStateJson('t');
const STATE_JSON_X = buildStateJson('x');

/**
 * True when `row` may be claimed by a delivery with fingerprint `fp` and replay id `replay`: a failed row whose
 * retry time passed, a processing row without a live lease, or a dead-lettered row under a new replay id — and
 * only with the payload first recorded.
 */
function claimable(row: string, fp: string, replay: string): string {
  return `((${row}.fingerprint IS NULL OR ${row}.fingerprint = ${fp}) AND (
      (${row}.status = 'failed' AND ${row}.available_at <= now())
   OR (${row}.status = 'processing' AND (${row}.locked_until IS NULL OR ${row}.locked_until <= now()))
   OR (${row}.status = 'dead_lettered' AND ${replay} IS NOT NULL AND ${replay} IS DISTINCT FROM ${row}.last_replay_id)))`;
}

/**
 * True when `row` is completed and was recorded with the payload fingerprint `fp` (or with none): a plain
 * duplicate, which the lean claims answer with this flag alone instead of the row's state (json): Postgres
 * builds no json and Node parses none (pgbench, duplicates only: about 13% more claims a second).
 */
function plainDuplicate(row: string, fp: string): string {
  return `(${row}.status = 'completed' AND (${row}.fingerprint IS NULL OR ${row}.fingerprint = ${fp}))`;
}

/** A short, stable name suffix for a prepared statement: its text's hash, so another text gets another name. */
function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** The single-delivery claim of a new id as a prepared statement (see `InboxStatements.preparedNewClaim`). */
export interface PreparedNewClaim {
  /** The statement name, to remember per connection. */
  readonly name: string;
  /** The PREPARE statement creating it. */
  readonly prepare: string;
  /**
   * EXECUTE with this delivery's values: one row with `attempts` when it wrote the new row, one row with the
   * existing row's `state` (json) when the id has a row — or, for a completed row with this payload, `duplicate`
   * true and no state — none when it did neither. (The take-over claim answers as `claim` does.)
   */
  claim(settings: ClaimSettings, row: ClaimRow, leaseMs?: number): string;
}

/** The claim-and-statements function of `InboxStatements.onceFunction`. */
export interface OnceFunction {
  /** The function's name in `pg_temp`, to remember per connection. */
  readonly name: string;
  /** The `CREATE FUNCTION pg_temp.…` statement. */
  readonly create: string;
  /** The `PREPARE` of its call (after `create`, on the same connection). */
  readonly prepare: string;
  /**
   * The `EXECUTE` of one delivery, an autocommit statement answering one text column `answer`: `a<attempts>
   * <claimed_from>` when it took the delivery and ran the statements, `d` for a plain duplicate, `s<state json>`
   * for a row it did not take, NULL when it neither took nor saw one.
   */
  call(settings: ClaimSettings, row: ClaimRequest, statements: readonly string[]): string;
}

/** The batch claim-and-statements function of `InboxStatements.onceBatchFunction`. */
export interface OnceBatchFunction {
  /** The function's name in `pg_temp` (and of its prepared call), to remember per connection. */
  readonly name: string;
  /** The `CREATE FUNCTION pg_temp.…` statement. */
  readonly create: string;
  /** The `PREPARE` of its call (after `create`, on the same connection). */
  readonly prepare: string;
  /**
   * The `EXECUTE` of one batch (`rows` non-empty, distinct ids), an autocommit statement answering rows of
   * `message_id` and `answer`: `a<attempts>` for an id it took (its statements ran), `d` for a plain duplicate,
   * `s<state json>` for a row it did not take; no row for an id it neither took nor saw.
   */
  call(settings: ClaimSettings, rows: readonly ClaimRequest[], statements: readonly string[], owners: readonly string[]): string;
}

/** One delivery of a claim, with the lease token it would take (leased mode). */
export interface ClaimRow extends ClaimRequest {
  readonly leaseToken: string | null;
}

/** The statements of one inbox table. */
export class InboxStatements {
  readonly #t: string;
  readonly #r: string;

  constructor(names: InboxTableNames) {
    this.#t = names.qualifiedTable;
    this.#r = names.qualifiedReplayTable;
  }


  /**
   * Claims `rows` in one statement, which answers one row per id that exists afterwards: `claimed` true for the
   * ids it took (with `status`, `attempts`, `lease_token`, `claimed_from`, and `state` when it dead-lettered one),
   * false with the row's `state` (json) for the ids it did not take. An id missing from the answer had a row that
   * only became visible after the statement's snapshot (a concurrent delivery committed it): read it again. New ids are inserted with status `target` (transactional mode writes
   * `completed`: the commit is the completion); claimable rows are taken over. Rows visible as not
   * claimable are filtered before the insert, so a plain duplicate takes no row lock and writes nothing. A
   * delivery whose attempt would exceed `maxAttempts` is not taken (see `exhaust`): the statement stays simple,
   * and crash loops are rare.
   * `leaseMs` is set in leased mode only.
   */
  claim(settings: ClaimSettings, rows: readonly ClaimRow[], target: 'completed' | 'processing', leaseMs?: number): string {
    const values = rows
      .map(
        (r) =>
          `(${sqlText(settings.consumer)}, ${sqlText(r.messageId)}, ${sqlText(r.fingerprint)}, ${sqlTimestamp(r.messageTimestamp)}, ${sqlInt(Math.max(1, r.deliveryCount))}::int, ${sqlText(r.replayId)}, ${sqlUuid(r.leaseToken)})`,
      )
      .join(',\n  ');
    return this.#claimText(target, {
      values,
      lockTimeout: `'${sqlInt(Math.max(1, Math.round(settings.lockTimeoutMs)))}'`,
      consumer: sqlText(settings.consumer),
      ids: sqlTextArray(rows.map((r) => r.messageId)),
      max: sqlInt(settings.maxAttempts),
      window: sqlMillis(settings.dedupeWindowMs),
      lockedUntil: leaseMs === undefined ? 'NULL::timestamptz' : `now() + ${sqlMillis(leaseMs)}`,
    });
  }

  /**
   * The claim of a batch whose ids mostly have no row — the common case of a fetched batch — without the full
   * claim's machinery: one `INSERT … ON CONFLICT DO NOTHING` of the new rows the full claim would write (in id
   * order, so concurrent batches wait on each other's rows in one order), and in the same statement the state of
   * every id that already had a row, read from the statement's snapshot (the CTE's own inserts are not visible to
   * it). Answers rows shaped as `claim` answers them: `claimed` true for the ids it inserted, false with `state`
   * for the ids with a row — but a completed row with the delivery's payload answers `duplicate` true and no
   * state. An id with a row this batch may take over (a retry due, an expired lease, a replay) then goes to the
   * full `claim`, in the same transaction; an id with neither (beyond `maxAttempts`, or committed by a
   * concurrent delivery after the snapshot) is read again, as after `claim`. Planning this statement costs about
   * half of the full claim's (EXPLAIN, 16 rows: 0.39 against 0.73 ms; 50 rows: 0.58 against 0.84 ms), and
   * Postgres plans a literal statement on every batch. The ids must be distinct (`handleBatch` sees to it).
   */
  leanClaim(settings: ClaimSettings, rows: readonly ClaimRow[], target: 'completed' | 'processing', leaseMs?: number): string {
    const values = rows
      .map(
        (r) =>
          `(${sqlText(r.messageId)}, ${sqlText(r.fingerprint)}, ${sqlTimestamp(r.messageTimestamp)}, ${sqlInt(Math.max(1, r.deliveryCount))}::int, ${sqlText(r.replayId)}, ${sqlUuid(r.leaseToken)})`,
      )
      .join(',\n  ');
    const consumer = sqlText(settings.consumer);
    const ids = sqlTextArray(rows.map((r) => r.messageId));
    const fingerprints = sqlTextArray(rows.map((r) => r.fingerprint));
    const completed = target === 'completed';
    return `WITH inserted AS (
INSERT INTO ${this.#t} (consumer, message_id, status, fingerprint, attempts, started_attempts, lease_token,
  locked_until, message_timestamp, completed_at, expires_at, last_replay_id, claimed_from)
SELECT ${consumer}, v.message_id, '${target}', v.fingerprint, v.attempt, v.attempt, v.lease_token,
  ${leaseMs === undefined ? 'NULL::timestamptz' : `now() + ${sqlMillis(leaseMs)}`}, v.message_timestamp,
  ${completed ? 'now()' : 'NULL::timestamptz'}, now() + ${sqlMillis(settings.dedupeWindowMs)}, v.replay_id, 'new'
FROM (VALUES
  ${values}
) AS v(message_id, fingerprint, message_timestamp, attempt, replay_id, lease_token)
  CROSS JOIN (SELECT set_config('lock_timeout', '${sqlInt(Math.max(1, Math.round(settings.lockTimeoutMs)))}', true)) AS lock_timeout
WHERE v.attempt <= ${sqlInt(settings.maxAttempts)}
ORDER BY v.message_id
ON CONFLICT (consumer, message_id) DO NOTHING
RETURNING message_id, attempts, lease_token::text AS lease_token)
SELECT true AS claimed, message_id, '${target}' AS status, attempts, lease_token, 'new' AS claimed_from, NULL::json AS state,
  false AS duplicate
FROM inserted
UNION ALL
SELECT false, x.message_id, x.status, x.attempts, x.lease_token::text, x.claimed_from,
  CASE WHEN ${plainDuplicate('x', 'i.fingerprint')} THEN NULL ELSE ${stateJson('x')} END, ${plainDuplicate('x', 'i.fingerprint')}
FROM unnest(${ids}, ${fingerprints}) AS i(message_id, fingerprint)
  CROSS JOIN LATERAL ${this.#rowOf(consumer, 'i.message_id')}`;
  }

  /**
   * The claim of one delivery whose id has no row — the common case — without the full claim's machinery: an
   * `INSERT … ON CONFLICT DO NOTHING` writing the same new row the full claim would (status `target`, attempt
   * `max(1, deliveryCount)` if within `maxAttempts`), which takes no lock and writes nothing when the id has a
   * row, and in the same statement a read of the row as it was before — skipped when the insert wrote one
   * (a data-modifying CTE does not see its own insert, so the read would find nothing, but the index probe for
   * the fresh entry still cost Postgres CPU: pgbench with this statement, 7 s runs twice, 2,926 and 2,739 tps
   * with the read always done, 3,483 and 3,449 with it skipped). The lock timeout is set (transaction-local) before the insert can
   * wait on a concurrent delivery's uncommitted row. When the id has a row, the store decides from its state:
   * a duplicate (completed, waiting, leased …) is answered at once; a row this delivery may take over (a retry
   * due, an expired lease, a replay) goes to the full `claim`, in the same transaction.
   */
  preparedNewClaim(target: 'completed' | 'processing'): PreparedNewClaim {
    const leased = target === 'processing';
    const text = `WITH inserted AS (
INSERT INTO ${this.#t} (consumer, message_id, status, fingerprint, attempts, started_attempts, lease_token,
  locked_until, message_timestamp, completed_at, expires_at, last_replay_id, claimed_from)
SELECT $1::text, $2::text, '${target}', $3::text, $5::int, $5::int, $7::uuid,
  ${leased ? 'now() + make_interval(secs => $10::float8 / 1000)' : 'NULL::timestamptz'}, $4::timestamptz,
  ${leased ? 'NULL::timestamptz' : 'now()'}, now() + make_interval(secs => $9::float8 / 1000), $6::text, 'new'
FROM (SELECT set_config('lock_timeout', $${leased ? 11 : 10}::text, true)) AS lock_timeout
WHERE $5::int <= $8::int
ON CONFLICT (consumer, message_id) DO NOTHING
RETURNING attempts)
SELECT attempts, NULL::json AS state, false AS duplicate FROM inserted
UNION ALL
SELECT NULL::int, CASE WHEN ${plainDuplicate('x', '$3::text')} THEN NULL ELSE ${stateJson('x')} END,
  ${plainDuplicate('x', '$3::text')}
FROM ${this.#t} x
WHERE NOT EXISTS (SELECT 1 FROM inserted) AND x.consumer = $1::text AND x.message_id = $2::text`;
    return preparedClaim('inboxkit_new', text, leased);
  }

  /**
   * The lean claim of one delivery and a statement handler's statements in one statement: a temporary PL/pgSQL
   * function, created once per connection, sent as an autocommit `SELECT`. One round trip for a first delivery,
   * where BEGIN + claim, then the statements + COMMIT take two; and for a duplicate one round trip with nothing
   * to roll back afterwards. The function inserts the new row exactly as `preparedNewClaim` (transactional mode,
   * status `completed`) — or, for a delivery whose id probably has a row (`ClaimRequest.expectsRow`), takes it
   * over with the full claim — and, only when it took the delivery, runs each of `statements` (`EXECUTE` of
   * statements prepared on the connection) with `EXECUTE`. Otherwise it runs nothing and answers the row's
   * state: after the lean insert, read anew, so a concurrent delivery that committed meanwhile is seen (unlike
   * in the CTE); after the full claim, as the claim answered it. It answers one text value (see
   * `OnceFunction.call`), not a table: a scalar function costs Postgres less than a set-returning one, and its
   * call is prepared once per connection like the claim. A statement's error aborts the whole statement: nothing is committed, the claim
   * included, and its context says `at EXECUTE`. No server-side `ERROR` for a duplicate (a guard that failed
   * the transaction did that), and no function in the application's schemas: it lives in the session's
   * temporary schema and goes away with the connection.
   */
  onceFunction(): OnceFunction {
    // The take-over claim is the full claim of one id, with the function's parameters for values.
    const takeOver = this.#claimText('completed', {
      values: '(p_consumer, p_message_id, p_fingerprint, p_message_timestamp, p_attempt, p_replay_id, NULL::uuid)',
      lockTimeout: 'p_lock_timeout',
      consumer: 'p_consumer',
      ids: 'ARRAY[p_message_id]',
      max: 'p_max_attempts',
      window: 'make_interval(secs => p_window_ms / 1000)',
      lockedUntil: 'NULL::timestamptz',
    });
    const body = `
#variable_conflict use_column
DECLARE
  v_attempts int;
  v_from text := 'new';
  v_row record;
  v_statement text;
  v_answer text;
BEGIN
  IF p_take_over THEN
    FOR v_row IN ${takeOver.replaceAll('\n', '\n    ')}
    LOOP
      IF NOT v_row.claimed THEN
        RETURN 's' || v_row.state::text;
      END IF;
      v_attempts := v_row.attempts;
      v_from := v_row.claimed_from;
    END LOOP;
    IF v_attempts IS NULL THEN
      RETURN NULL;
    END IF;
  ELSE
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    IF p_attempt <= p_max_attempts THEN
      INSERT INTO ${this.#t} (consumer, message_id, status, fingerprint, attempts, started_attempts, lease_token,
        locked_until, message_timestamp, completed_at, expires_at, last_replay_id, claimed_from)
      VALUES (p_consumer, p_message_id, 'completed', p_fingerprint, p_attempt, p_attempt, NULL, NULL,
        p_message_timestamp, now(), now() + make_interval(secs => p_window_ms / 1000), p_replay_id, 'new')
      ON CONFLICT (consumer, message_id) DO NOTHING
      RETURNING attempts INTO v_attempts;
    END IF;
    IF v_attempts IS NULL THEN
      SELECT CASE WHEN ${plainDuplicate('x', 'p_fingerprint')} THEN 'd' ELSE 's' || ${stateJson('x')}::text END
      INTO v_answer
      FROM ${this.#t} x
      WHERE x.consumer = p_consumer AND x.message_id = p_message_id;
      RETURN v_answer;
    END IF;
  END IF;
  FOREACH v_statement IN ARRAY p_statements LOOP
    EXECUTE v_statement;
  END LOOP;
  RETURN 'a' || v_attempts || ' ' || v_from;
END`;
    const name = `inboxkit_once_${digest(body)}`;
    const types = 'text, text, text, timestamptz, int, text, int, float8, text, boolean, text[]';
    return {
      name,
      create: `CREATE FUNCTION pg_temp.${name}(p_consumer text, p_message_id text, p_fingerprint text,
  p_message_timestamp timestamptz, p_attempt int, p_replay_id text, p_max_attempts int, p_window_ms float8,
  p_lock_timeout text, p_take_over boolean, p_statements text[])
RETURNS text
LANGUAGE plpgsql VOLATILE AS $inboxkit_once$${body}
$inboxkit_once$`,
      prepare: `PREPARE ${name} (${types}) AS SELECT pg_temp.${name}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS answer`,
      call: (settings, r, statements) =>
        `EXECUTE ${name} (${sqlText(settings.consumer)}, ${sqlText(r.messageId)}, ${sqlText(r.fingerprint)}, ${sqlTimestamp(
          r.messageTimestamp,
        )}, ${sqlInt(Math.max(1, r.deliveryCount))}, ${sqlText(r.replayId)}, ${sqlInt(settings.maxAttempts)}, ${sqlInt(
          settings.dedupeWindowMs,
        )}, '${sqlInt(Math.max(1, Math.round(settings.lockTimeoutMs)))}', ${r.expectsRow === true ? 'true' : 'false'}, ${sqlTextArray(
          statements,
        )})`,
    };
  }

  /**
   * `onceFunction` for a batch of new ids (`handleBatch` with statement handlers): one autocommit statement
   * inserts the rows of the ids that have none, exactly as the lean batch claim does (in id order, so that
   * concurrent batches wait on each other's rows in one order), runs the statements of the messages it took
   * (`p_owners` names each statement's message id), and answers the state of every other id. One round trip
   * per batch, where the claim with BEGIN and the statements with COMMIT take two. A statement's error aborts
   * the whole statement, every message's claim with it. The ids must be distinct.
   */
  onceBatchFunction(): OnceBatchFunction {
    const body = `
#variable_conflict use_column
DECLARE
  v_taken text[] := '{}';
  v_row record;
  v_i int;
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout, true);
  FOR v_row IN
    INSERT INTO ${this.#t} (consumer, message_id, status, fingerprint, attempts, started_attempts, lease_token,
      locked_until, message_timestamp, completed_at, expires_at, last_replay_id, claimed_from)
    SELECT p_consumer, v.message_id, 'completed', v.fingerprint, v.attempt, v.attempt, NULL, NULL, v.message_timestamp,
      now(), now() + make_interval(secs => p_window_ms / 1000), v.replay_id, 'new'
    FROM unnest(p_message_ids, p_fingerprints, p_message_timestamps, p_attempts, p_replay_ids)
      AS v(message_id, fingerprint, message_timestamp, attempt, replay_id)
    WHERE v.attempt <= p_max_attempts
    ORDER BY v.message_id
    ON CONFLICT (consumer, message_id) DO NOTHING
    RETURNING message_id, attempts
  LOOP
    v_taken := v_taken || v_row.message_id;
    out_message_id := v_row.message_id;
    out_answer := 'a' || v_row.attempts;
    RETURN NEXT;
  END LOOP;
  FOR v_i IN 1 .. coalesce(array_length(p_statements, 1), 0) LOOP
    IF p_owners[v_i] = ANY (v_taken) THEN
      EXECUTE p_statements[v_i];
    END IF;
  END LOOP;
  RETURN QUERY
    SELECT i.message_id, CASE WHEN ${plainDuplicate('x', 'i.fingerprint')} THEN 'd' ELSE 's' || ${stateJson('x')}::text END
    FROM unnest(p_message_ids, p_fingerprints) AS i(message_id, fingerprint)
      CROSS JOIN LATERAL ${this.#rowOf('p_consumer', 'i.message_id')}
    WHERE i.message_id <> ALL (v_taken);
END`;
    const name = `inboxkit_batch_${digest(body)}`;
    const types = 'text, text[], text[], timestamptz[], int[], text[], int, float8, text, text[], text[]';
    return {
      name,
      create: `CREATE FUNCTION pg_temp.${name}(p_consumer text, p_message_ids text[], p_fingerprints text[],
  p_message_timestamps timestamptz[], p_attempts int[], p_replay_ids text[], p_max_attempts int, p_window_ms float8,
  p_lock_timeout text, p_statements text[], p_owners text[])
RETURNS TABLE (out_message_id text, out_answer text)
LANGUAGE plpgsql VOLATILE AS $inboxkit_batch$${body}
$inboxkit_batch$`,
      prepare: `PREPARE ${name} (${types}) AS SELECT out_message_id AS message_id, out_answer AS answer FROM pg_temp.${name}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      call: (settings, rows, statements, owners) =>
        `EXECUTE ${name} (${sqlText(settings.consumer)}, ${sqlTextArray(rows.map((r) => r.messageId))}, ${sqlTextArray(
          rows.map((r) => r.fingerprint),
        )}, ARRAY[${rows.map((r) => sqlTimestamp(r.messageTimestamp)).join(', ')}]::timestamptz[], ARRAY[${rows
          .map((r) => sqlInt(Math.max(1, r.deliveryCount)))
          .join(', ')}]::int[], ARRAY[${rows.map((r) => sqlText(r.replayId)).join(', ')}]::text[], ${sqlInt(
          settings.maxAttempts,
        )}, ${sqlInt(settings.dedupeWindowMs)}, '${sqlInt(Math.max(1, Math.round(settings.lockTimeoutMs)))}', ${sqlTextArray(
          statements,
        )}, ${sqlTextArray(owners)})`,
    };
  }

  /**
   * The full `claim` of one delivery as a prepared statement (same parameters as `preparedNewClaim`), for a
   * delivery whose id probably has a row already — an attempt recorded as started (Kafka), a broker
   * redelivery, a replay: it takes a claimable row over in the same round trip as BEGIN, where the lean claim
   * would answer the row's state and need the full claim after it, planned anew each time. (For a new id it
   * is dearer than the lean claim: its probe for a row that is not claimable costs an index lookup.)
   */
  preparedTakeOverClaim(target: 'completed' | 'processing'): PreparedNewClaim {
    const leased = target === 'processing';
    const text = this.#claimText(target, {
      values: '($1::text, $2::text, $3::text, $4::timestamptz, $5::int, $6::text, $7::uuid)',
      lockTimeout: `$${leased ? 11 : 10}::text`,
      consumer: '$1::text',
      ids: 'ARRAY[$2::text]',
      max: '$8::int',
      window: 'make_interval(secs => $9::float8 / 1000)',
      lockedUntil: leased ? 'now() + make_interval(secs => $10::float8 / 1000)' : 'NULL::timestamptz',
    });
    return preparedClaim('inboxkit_takeover', text, leased);
  }

  #claimText(
    target: 'completed' | 'processing',
    p: {
      readonly values: string;
      /** A text expression of the lock timeout in ms, applied (transaction-local) before the insert can wait. */
      readonly lockTimeout: string;
      readonly consumer: string;
      readonly ids: string;
      readonly max: string;
      readonly window: string;
      readonly lockedUntil: string;
    },
  ): string {
    const { values, max, window, lockedUntil } = p;
    // The attempt this delivery would be: a replay starts again at 1 (or the broker's count of the copy).
    const next = `CASE WHEN t.status = 'dead_lettered' THEN excluded.started_attempts
      ELSE greatest(t.attempts + 1, t.started_attempts, excluded.started_attempts) END`;
    const completed = target === 'completed';
    return `WITH claimed AS (
INSERT INTO ${this.#t} AS t (consumer, message_id, status, fingerprint, attempts, started_attempts, lease_token,
  locked_until, available_at, received_at, message_timestamp, completed_at, expires_at, replay_count, last_replay_id,
  claimed_from)
SELECT v.consumer, v.message_id, '${target}', v.fingerprint, v.attempt, v.attempt, v.lease_token, ${lockedUntil},
  now(), now(), v.message_timestamp, ${completed ? 'now()' : 'NULL::timestamptz'}, now() + ${window}, 0, v.replay_id, 'new'
FROM (VALUES
  ${values}
) AS v(consumer, message_id, fingerprint, message_timestamp, attempt, replay_id, lease_token)
  -- SET LOCAL lock_timeout without a statement of its own: evaluated before the first row reaches the insert,
  -- so a wait on a concurrent delivery's uncommitted row is bounded.
  CROSS JOIN (SELECT set_config('lock_timeout', ${p.lockTimeout}, true)) AS lock_timeout
WHERE v.attempt <= ${max} AND NOT EXISTS (
  SELECT 1 FROM ${this.#t} x
  WHERE x.consumer = v.consumer AND x.message_id = v.message_id AND NOT ${claimable('x', 'v.fingerprint', 'v.replay_id')})
ORDER BY v.message_id
ON CONFLICT (consumer, message_id) DO UPDATE SET
  status = '${target}',
  fingerprint = excluded.fingerprint,
  attempts = ${next},
  started_attempts = ${next},
  lease_token = excluded.lease_token,
  locked_until = excluded.locked_until,
  available_at = now(),
  message_timestamp = coalesce(t.message_timestamp, excluded.message_timestamp),
  completed_at = ${completed ? 'now()' : 'NULL'},
  expires_at = now() + ${window},
  dead_letter_reason = NULL,
  dead_lettered_at = NULL,
  replay_count = t.replay_count + CASE WHEN t.status = 'dead_lettered' THEN 1 ELSE 0 END,
  last_replay_id = CASE WHEN t.status = 'dead_lettered' THEN excluded.last_replay_id ELSE t.last_replay_id END,
  first_failure_at = CASE WHEN t.status = 'dead_lettered' THEN NULL ELSE t.first_failure_at END,
  last_failure_at = CASE WHEN t.status = 'dead_lettered' THEN NULL ELSE t.last_failure_at END,
  claimed_from = CASE WHEN t.status = 'processing' AND t.lease_token IS NOT NULL THEN 'lease-expired' ELSE t.status END
WHERE ${claimable('t', 'excluded.fingerprint', 'excluded.last_replay_id')} AND ${next} <= ${max}
RETURNING t.message_id, t.status, t.attempts, t.lease_token::text AS lease_token, t.claimed_from, NULL::json AS state)
SELECT true AS claimed, message_id, status, attempts, lease_token, claimed_from, state FROM claimed
UNION ALL
SELECT false, x.message_id, x.status, x.attempts, x.lease_token::text, x.claimed_from, ${stateJson('x')}
FROM unnest(${p.ids}) AS i(message_id) CROSS JOIN LATERAL ${this.#rowOf(p.consumer, 'i.message_id')}
WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.message_id = x.message_id)`;
  }

  /**
   * `(SELECT … ) AS x`: the row of one id, for a read of a batch's rows as `unnest(ids) … CROSS JOIN LATERAL`
   * this. Each id is then one probe of the primary key, whatever the statistics say. Written as
   * `consumer = … AND message_id = ANY(ids)` instead, the read was planned from the statistics of `consumer`:
   * for a consumer they did not know yet (a new table, a consumer new to a shared table, either grown since the
   * last ANALYZE), Postgres took every row of the consumer from the index and filtered them by id — EXPLAIN on
   * 100,000 rows before their ANALYZE: 21.8 ms for a batch of 200 ids, against 0.4 ms for this read. `OFFSET 0`
   * keeps the planner from flattening the subquery into a join it could then hash.
   */
  #rowOf(consumer: string, id: string): string {
    return `(SELECT * FROM ${this.#t} x WHERE x.consumer = ${consumer} AND x.message_id = ${id} OFFSET 0) AS x`;
  }

  /**
   * A delivery whose attempt would exceed `maxAttempts` is not run: its row is written `dead_lettered`
   * (`max-attempts`) instead — if the row is still claimable by this delivery, else nothing. `next` is the attempt
   * number the claim would have given. Answers the row's state (json) when written.
   */
  exhaust(settings: ClaimSettings, row: ClaimRequest, next: number): string {
    const fp = sqlText(row.fingerprint);
    const replay = sqlText(row.replayId);
    return `UPDATE ${this.#t} AS t SET status = 'dead_lettered', attempts = ${sqlInt(next - 1)}, started_attempts = ${sqlInt(next)},
  lease_token = NULL, locked_until = NULL, completed_at = NULL, available_at = now(),
  dead_letter_reason = 'max-attempts', dead_lettered_at = now(), fingerprint = coalesce(t.fingerprint, ${fp}),
  replay_count = t.replay_count + CASE WHEN t.status = 'dead_lettered' THEN 1 ELSE 0 END,
  last_replay_id = CASE WHEN t.status = 'dead_lettered' THEN ${replay} ELSE t.last_replay_id END,
  first_failure_at = CASE WHEN t.status = 'dead_lettered' THEN NULL ELSE t.first_failure_at END,
  last_failure_at = CASE WHEN t.status = 'dead_lettered' THEN NULL ELSE t.last_failure_at END,
  claimed_from = CASE WHEN t.status = 'processing' AND t.lease_token IS NOT NULL THEN 'lease-expired' ELSE t.status END
WHERE t.consumer = ${sqlText(settings.consumer)} AND t.message_id = ${sqlText(row.messageId)}
  AND ${claimable('t', fp, replay)}
RETURNING ${stateJson('t')} AS state`;
  }

  /** `exhaust` for an id without a row (the broker's delivery count alone is beyond `maxAttempts`). */
  exhaustNew(settings: ClaimSettings, row: ClaimRequest, next: number): string {
    return `INSERT INTO ${this.#t} AS t (consumer, message_id, status, fingerprint, attempts, started_attempts, available_at,
  received_at, message_timestamp, expires_at, dead_letter_reason, dead_lettered_at, last_replay_id, claimed_from)
VALUES (${sqlText(settings.consumer)}, ${sqlText(row.messageId)}, 'dead_lettered', ${sqlText(row.fingerprint)}, ${sqlInt(next - 1)},
  ${sqlInt(next)}, now(), now(), ${sqlTimestamp(row.messageTimestamp)}, now() + ${sqlMillis(settings.dedupeWindowMs)},
  'max-attempts', now(), ${sqlText(row.replayId)}, 'new')
ON CONFLICT (consumer, message_id) DO NOTHING
RETURNING ${stateJson('t')} AS state`;
  }

  /** The current rows of `ids` (a claim's companion: what it found when it did not claim). */
  rows(consumer: string, ids: readonly string[]): string {
    if (ids.length === 1) {
      return `SELECT ${ROW} FROM ${this.#t} WHERE consumer = ${sqlText(consumer)} AND message_id = ${sqlText(ids[0])}`;
    }
    return `SELECT ${ROW_X} FROM unnest(${sqlTextArray(ids)}) AS i(message_id)
  CROSS JOIN LATERAL ${this.#rowOf(sqlText(consumer), 'i.message_id')}`;
  }

  /**
   * Records a failed attempt. Transactional mode upserts (the claim rolled back), but never over a row that
   * completed or was dead-lettered meanwhile; leased mode updates only while `failure.leaseToken` holds.
   */
  recordFailure(settings: ClaimSettings, failure: FailureRecord): string {
    const dead = failure.deadLetterReason !== undefined;
    const status = dead ? 'dead_lettered' : 'failed';
    const availableAt = dead ? 'now()' : `now() + ${sqlMillis(failure.retryDelayMs)}`;
    const attempt = sqlInt(failure.attempt);
    // A transactional attempt that reopened a dead letter: its claim rolled back, so reapply the reopening.
    const reopen = failure.reopenedBy === undefined ? 'false' : `t.status = 'dead_lettered'`;
    const set = `status = '${status}',
  attempts = CASE WHEN ${reopen} THEN ${attempt} ELSE greatest(t.attempts, ${attempt}) END,
  started_attempts = CASE WHEN ${reopen} THEN ${attempt} ELSE greatest(t.started_attempts, ${attempt}) END,
  available_at = ${availableAt},
  last_error = ${sqlJson(failure.error)},
  dead_letter_reason = ${sqlText(failure.deadLetterReason)},
  dead_lettered_at = ${dead ? 'now()' : 'NULL'},
  first_failure_at = CASE WHEN ${reopen} THEN now() ELSE coalesce(t.first_failure_at, now()) END,
  last_failure_at = now(),
  replay_count = t.replay_count + CASE WHEN ${reopen} THEN 1 ELSE 0 END,
  last_replay_id = CASE WHEN ${reopen} THEN ${sqlText(failure.reopenedBy)} ELSE t.last_replay_id END,
  claimed_from = CASE WHEN ${reopen} THEN 'dead_lettered' ELSE t.claimed_from END,
  lease_token = NULL,
  locked_until = NULL,
  completed_at = NULL,
  fingerprint = coalesce(t.fingerprint, ${sqlText(failure.fingerprint)}),
  message_timestamp = coalesce(t.message_timestamp, ${sqlTimestamp(failure.messageTimestamp)})`;
    const key = `t.consumer = ${sqlText(settings.consumer)} AND t.message_id = ${sqlText(failure.messageId)}`;
    if (failure.leaseToken !== null) {
      return `UPDATE ${this.#t} AS t SET ${set}
WHERE ${key} AND t.status = 'processing' AND t.lease_token = ${sqlUuid(failure.leaseToken)}
RETURNING ${rowColumns('t')}`;
    }
    const reopenable =
      failure.reopenedBy === undefined
        ? ''
        : ` OR (t.status = 'dead_lettered' AND t.last_replay_id IS DISTINCT FROM ${sqlText(failure.reopenedBy)})`;
    return `INSERT INTO ${this.#t} AS t (consumer, message_id, status, fingerprint, attempts, started_attempts,
  available_at, received_at, message_timestamp, expires_at, last_error, dead_letter_reason, dead_lettered_at,
  first_failure_at, last_failure_at, last_replay_id, claimed_from)
VALUES (${sqlText(settings.consumer)}, ${sqlText(failure.messageId)}, '${status}', ${sqlText(failure.fingerprint)},
  ${attempt}, ${attempt}, ${availableAt}, now(), ${sqlTimestamp(failure.messageTimestamp)},
  now() + ${sqlMillis(settings.dedupeWindowMs)}, ${sqlJson(failure.error)}, ${sqlText(failure.deadLetterReason)},
  ${dead ? 'now()' : 'NULL'}, now(), now(), ${sqlText(failure.reopenedBy)}, 'new')
ON CONFLICT (consumer, message_id) DO UPDATE SET ${set}
WHERE (t.status IN ('failed', 'processing')${reopenable})
  AND (t.fingerprint IS NULL OR t.fingerprint = excluded.fingerprint)
RETURNING ${rowColumns('t')}`;
  }

  /** Leased mode: completes the row if the lease token still holds. Returns one row, or none when fenced off. */
  completeLease(settings: ClaimSettings, messageId: string, leaseToken: string): string {
    return `UPDATE ${this.#t} SET status = 'completed', completed_at = now(),
  expires_at = now() + ${sqlMillis(settings.dedupeWindowMs)}, lease_token = NULL, locked_until = NULL
WHERE consumer = ${sqlText(settings.consumer)} AND message_id = ${sqlText(messageId)}
  AND status = 'processing' AND lease_token = ${sqlUuid(leaseToken)}
RETURNING 1 AS completed`;
  }

  /** Counts an attempt as started for each id whose row a claim could take (or that has no row yet). */
  recordAttemptsStarted(settings: ClaimSettings, ids: readonly string[]): string {
    return `INSERT INTO ${this.#t} AS t (consumer, message_id, status, attempts, started_attempts, available_at,
  received_at, expires_at)
SELECT ${sqlText(settings.consumer)}, id, 'processing', 0, 1, now(), now(), now() + ${sqlMillis(settings.dedupeWindowMs)}
FROM unnest(${sqlTextArray([...new Set(ids)].sort())}) AS id
ON CONFLICT (consumer, message_id) DO UPDATE SET started_attempts = greatest(t.started_attempts, t.attempts) + 1
WHERE (t.status = 'failed' AND t.available_at <= now())
   OR (t.status = 'processing' AND (t.locked_until IS NULL OR t.locked_until <= now()))`;
  }

  /** Appends one replay audit line. */
  recordReplay(entry: ReplayAuditEntry): string {
    return `INSERT INTO ${this.#r} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
VALUES (${sqlText(entry.replayId)}, ${sqlText(entry.consumer)}, ${sqlText(entry.messageId)},
  ${sqlText(entry.requestedBy)}, ${sqlTimestamp(entry.requestedAt)}, ${sqlText(entry.outcome)})`;
  }

  /**
   * Inside a batch transaction: rewrites claimed rows whose handler failed as `failed` (with a retry time) or
   * `dead_lettered`, one statement for the batch.
   */
  batchFailures(settings: ClaimSettings, failures: readonly FailureRecord[]): string {
    const values = failures
      .map((f) => {
        const dead = f.deadLetterReason !== undefined;
        return `(${sqlText(f.messageId)}, ${dead ? "'dead_lettered'" : "'failed'"}, ${sqlInt(f.attempt)}::int, ${sqlInt(dead ? 0 : Math.round(f.retryDelayMs))}::bigint, ${sqlJson(f.error)}, ${sqlText(f.deadLetterReason)})`;
      })
      .join(',\n  ');
    return `UPDATE ${this.#t} AS t SET status = v.status, attempts = v.attempt,
  available_at = now() + make_interval(secs => v.delay_ms::float8 / 1000), last_error = v.error,
  dead_letter_reason = v.reason, dead_lettered_at = CASE WHEN v.status = 'dead_lettered' THEN now() END,
  first_failure_at = coalesce(t.first_failure_at, now()), last_failure_at = now(),
  completed_at = NULL, lease_token = NULL, locked_until = NULL
FROM (VALUES
  ${values}
) AS v(message_id, status, attempt, delay_ms, error, reason)
WHERE t.consumer = ${sqlText(settings.consumer)} AND t.message_id = v.message_id
RETURNING ${rowColumns('t')}`;
  }

  // ── inspection ──────────────────────────────────────────────────────────────────────────────────────────

  countByStatus(consumer: string | undefined): string {
    return `SELECT consumer, status, count(*)::int AS count FROM ${this.#t}
${consumer === undefined ? '' : `WHERE consumer = ${sqlText(consumer)}`}
GROUP BY consumer, status ORDER BY consumer, status`;
  }

  countDeadLettersByReason(consumer: string | undefined): string {
    return `SELECT consumer, coalesce(dead_letter_reason, 'unknown') AS reason, count(*)::int AS count FROM ${this.#t}
WHERE status = 'dead_lettered'${consumer === undefined ? '' : ` AND consumer = ${sqlText(consumer)}`}
GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2`;
  }

  listDeadLetters(filter: { consumer?: string; reason?: string; since?: Date; until?: Date; limit: number }): string {
    const where = [`status = 'dead_lettered'`];
    if (filter.consumer !== undefined) where.push(`consumer = ${sqlText(filter.consumer)}`);
    if (filter.reason !== undefined) where.push(`dead_letter_reason = ${sqlText(filter.reason)}`);
    if (filter.since !== undefined) where.push(`dead_lettered_at >= ${sqlTimestamp(filter.since)}`);
    if (filter.until !== undefined) where.push(`dead_lettered_at < ${sqlTimestamp(filter.until)}`);
    return `SELECT ${ROW} FROM ${this.#t} WHERE ${where.join(' AND ')}
ORDER BY dead_lettered_at DESC NULLS LAST, consumer, message_id LIMIT ${sqlInt(filter.limit)}`;
  }

  listProcessing(filter: { consumer?: string; limit: number }): string {
    return `SELECT ${ROW},
  CASE WHEN lease_token IS NULL THEN 'none' WHEN locked_until > now() THEN 'live' ELSE 'expired' END AS lease,
  greatest(0, extract(epoch FROM (now() - received_at)) * 1000)::float8 AS age_ms
FROM ${this.#t} WHERE status = 'processing'${filter.consumer === undefined ? '' : ` AND consumer = ${sqlText(filter.consumer)}`}
ORDER BY received_at, consumer, message_id LIMIT ${sqlInt(filter.limit)}`;
  }

  countExpiringSoon(filter: { consumer?: string; withinMs: number }): string {
    return `SELECT consumer, count(*)::int AS count FROM ${this.#t}
WHERE status = 'completed' AND expires_at < now() + ${sqlMillis(filter.withinMs)}${
      filter.consumer === undefined ? '' : ` AND consumer = ${sqlText(filter.consumer)}`
    }
GROUP BY consumer ORDER BY consumer`;
  }

  listReplays(filter: { consumer?: string; messageId?: string; replayId?: string; limit: number }): string {
    const where: string[] = [];
    if (filter.consumer !== undefined) where.push(`consumer = ${sqlText(filter.consumer)}`);
    if (filter.messageId !== undefined) where.push(`message_id = ${sqlText(filter.messageId)}`);
    if (filter.replayId !== undefined) where.push(`replay_id = ${sqlText(filter.replayId)}`);
    return `SELECT replay_id, consumer, message_id, requested_by, requested_at, at, outcome FROM ${this.#r}
${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
ORDER BY at DESC, id DESC LIMIT ${sqlInt(filter.limit)}`;
  }

  // ── pruning ─────────────────────────────────────────────────────────────────────────────────────────────

  /** Takes the session-level prune lock of this table, if free: `locked` is true when taken. */
  tryPruneLock(key: bigint): string {
    return `SELECT pg_try_advisory_lock(${key.toString()}::bigint) AS locked`;
  }

  pruneUnlock(key: bigint): string {
    return `SELECT pg_advisory_unlock(${key.toString()}::bigint) AS unlocked`;
  }

  /** Deletes up to `batchSize` expired completed rows (skipping rows locked by a claim in flight). */
  pruneBatch(options: PruneOptions & { batchSize: number }): string {
    const consumer = options.consumer === undefined ? '' : ` AND consumer = ${sqlText(options.consumer)}`;
    return `WITH doomed AS (
  SELECT ctid FROM ${this.#t}
  WHERE status = 'completed' AND expires_at < now()${consumer}
  LIMIT ${sqlInt(options.batchSize)} FOR UPDATE SKIP LOCKED),
gone AS (DELETE FROM ${this.#t} AS t USING doomed WHERE t.ctid = doomed.ctid AND t.status = 'completed' RETURNING 1)
SELECT count(*)::int AS deleted FROM gone`;
  }

  pruneCount(options: PruneOptions): string {
    const consumer = options.consumer === undefined ? '' : ` AND consumer = ${sqlText(options.consumer)}`;
    return `SELECT count(*)::int AS count FROM ${this.#t} WHERE status = 'completed' AND expires_at < now()${consumer}`;
  }
}

/** A prepared claim statement of one delivery: its name, its PREPARE, and its EXECUTE for a delivery. */
function preparedClaim(prefix: string, text: string, leased: boolean): PreparedNewClaim {
  const name = `${prefix}_${digest(text)}`;
  const types = `text, text, text, timestamptz, int, text, uuid, int, float8${leased ? ', float8' : ''}, text`;
  return {
    name,
    prepare: `PREPARE ${name} (${types}) AS ${text}`,
    claim: (settings, r, leaseMs) =>
      `EXECUTE ${name} (${sqlText(settings.consumer)}, ${sqlText(r.messageId)}, ${sqlText(r.fingerprint)}, ${sqlTimestamp(
        r.messageTimestamp,
      )}, ${sqlInt(Math.max(1, r.deliveryCount))}, ${sqlText(r.replayId)}, ${sqlUuid(r.leaseToken)}, ${sqlInt(
        settings.maxAttempts,
      )}, ${sqlInt(settings.dedupeWindowMs)}${leased ? `, ${sqlInt(Math.round(leaseMs ?? 0))}` : ''}, '${sqlInt(
        Math.max(1, Math.round(settings.lockTimeoutMs)),
      )}')`,
  };
}
