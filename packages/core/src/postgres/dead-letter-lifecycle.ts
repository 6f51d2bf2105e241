// The lifecycle of dead letters after an operator has looked at them: `discard` (it will never run; its record
// stays, for the retention, so a redelivery is a duplicate) and `archive` (kept as a record, out of the live
// views), each audited in the same statement as the row's new state, and the retention pruner that deletes
// retired rows. Also the aggregate reads the CLI and console need beyond the per-row inspection API (ages,
// dead-letter gauges, the last audit line of many ids), written here once for both layouts: in
// `daily-partitions` a row's key includes its `day`, so every join of the hot row and its details carries it.

import type { InboxStatus } from '../store.js';
import { STATUS_CHECK } from './inbox-schema.js';
import type { InboxTableNames } from './inbox-table-names.js';
import type { SqlStatement } from './sql-seam.js';

/** What an operator does to dead letters: `discard` (never to run) or `archive` (kept out of the live views). */
export type RetireAction = 'discard' | 'archive';

/** The states a retired dead letter takes, by action. */
export const RETIRED_STATUS: Readonly<Record<RetireAction, Extract<InboxStatus, 'discarded' | 'archived'>>> = Object.freeze({
  discard: 'discarded',
  archive: 'archived',
});

/**
 * Which dead letters of one consumer an act applies to. At least one of `messageIds`, `deadLetterReason`,
 * `since`/`until` or `all: true` is required, so an empty selection never means "everything".
 */
export interface DeadLetterSelection {
  readonly consumer: string;
  /** These ids (one id: a one-element array). Default: any id. */
  readonly messageIds?: readonly string[];
  /** Only dead letters of this reason (a reason group: `payload-mismatch`, `max-attempts` …). Default: any. */
  readonly deadLetterReason?: string;
  /** Only those dead-lettered at or after this time. Default: no bound. */
  readonly since?: Date;
  /** Only those dead-lettered before this time. Default: no bound. */
  readonly until?: Date;
  /** Every dead letter of the consumer (required when no other filter is given). Default is false. */
  readonly all?: boolean;
  /** At most this many rows, in message id order. Default: every row selected. */
  readonly limit?: number;
}

/** An audited act on a selection of dead letters (`discardDeadLetters`, `archiveDeadLetters`). */
export interface RetireDeadLettersRequest extends DeadLetterSelection {
  /** Who asked (recorded in the audit line). */
  readonly requestedBy: string;
  /** Why, in the operator's words (required: retiring a dead letter is a deliberate act). */
  readonly reason: string;
  /** The act's id, recorded as each audit line's replay id. */
  readonly actionId: string;
  /**
   * Say what would change without changing it: the same statement, rolled back (so the answer is exact). The
   * result's `dryRun` is true. Default is false.
   */
  readonly dryRun?: boolean;
}

/** One dead letter an act changed, as it was before. */
export interface RetiredDeadLetter {
  readonly consumer: string;
  readonly messageId: string;
  /** Its state before the act (`dead_lettered`, or `archived` for a discarded archive). */
  readonly priorStatus: InboxStatus;
  /** Its dead-letter reason (`null`: none recorded). */
  readonly deadLetterReason: string | null;
  readonly attempts: number;
}

/** What `discardDeadLetters`/`archiveDeadLetters` did: the rows changed (none when nothing matched). */
export interface RetireDeadLettersResult {
  readonly action: RetireAction;
  readonly actionId: string;
  /** True when nothing was written (`dryRun`). */
  readonly dryRun: boolean;
  readonly changed: readonly RetiredDeadLetter[];
}

/** The dead letters of one consumer still in the live views: how many, and since when the oldest waits. */
export interface DeadLetterAge {
  readonly consumer: string;
  readonly count: number;
  /** When the oldest was dead-lettered (`undefined`: none has a time recorded). */
  readonly oldestAt: Date | undefined;
}

/** Per consumer, the ages `inboxkit status` reports beyond the counts. */
export interface InboxAges {
  readonly consumer: string;
  /** The first receipt of the oldest row. */
  readonly oldestAt: Date | undefined;
  /** Completed rows past `expires_at`, not yet pruned. */
  readonly expired: number;
  /** The `expires_at` of the oldest of those. */
  readonly oldestExpiredAt: Date | undefined;
  /** Rows reopened by a replay at least once. */
  readonly replayed: number;
}

/** Which states each act takes a row from. */
const FROM: Readonly<Record<RetireAction, readonly InboxStatus[]>> = {
  discard: ['dead_lettered', 'archived'],
  archive: ['dead_lettered'],
};

/** Default of `PruneOptions.retiredRetentionMs`: 30 days. */
export const DEFAULT_RETIRED_RETENTION_MS = 30 * 86_400_000;

/**
 * Checks a request before any SQL runs: a `RangeError` naming the field, so bad input changes nothing.
 */
export function checkRetireRequest(r: RetireDeadLettersRequest): void {
  const text = (v: unknown, field: string): void => {
    if (typeof v !== 'string' || v.trim().length === 0) throw new RangeError(`${field} must be a non-empty string`);
  };
  text(r.consumer, 'consumer');
  text(r.requestedBy, 'requestedBy');
  text(r.reason, 'reason');
  text(r.actionId, 'actionId');
  if (r.messageIds !== undefined) {
    if (!Array.isArray(r.messageIds) || r.messageIds.length === 0) throw new RangeError('messageIds must be a non-empty array when given');
    for (const id of r.messageIds) text(id, 'each message id');
  }
  if (r.deadLetterReason !== undefined) text(r.deadLetterReason, 'deadLetterReason');
  for (const [field, d] of [['since', r.since], ['until', r.until]] as const) {
    if (d !== undefined && !(d instanceof Date && Number.isFinite(d.getTime()))) throw new RangeError(`${field} must be a valid Date`);
  }
  if (r.limit !== undefined && (!Number.isSafeInteger(r.limit) || r.limit < 1)) throw new RangeError('limit must be a positive integer');
  const narrowed = r.messageIds !== undefined || r.deadLetterReason !== undefined || r.since !== undefined || r.until !== undefined;
  if (!narrowed && r.all !== true) {
    throw new RangeError('select the dead letters: messageIds, deadLetterReason, since/until, or all: true for every one of the consumer');
  }
}

/** The statements of the lifecycle over one inbox's tables. */
export class DeadLetterLifecycleSql {
  readonly #n: InboxTableNames;
  /** `AND <a>.day = <b>.day` in the partitioned layout: a row's key. */
  readonly #day: (a: string, b: string) => string;

  constructor(names: InboxTableNames) {
    this.#n = names;
    this.#day = names.layout === 'table' ? () => '' : (a, b) => ` AND ${a}.day = ${b}.day`;
  }

  #same(a: string, b: string): string {
    return `${a}.consumer = ${b}.consumer AND ${a}.message_id = ${b}.message_id${this.#day(a, b)}`;
  }

  /**
   * One statement: locks the selected rows, sets their new state and appends one audit line each (`discarded
   * dead_lettered/max-attempts: <why>`), so the row and its audit commit together or not at all. Rows: the
   * changed ones as they were (`message_id`, `status`, `reason`, `attempts`).
   */
  retire(action: RetireAction, r: RetireDeadLettersRequest): SqlStatement {
    const n = this.#n;
    const to = RETIRED_STATUS[action];
    const key = n.layout === 'table' ? '' : ', h.day';
    return {
      sql: `WITH picked AS (
  SELECT h.consumer, h.message_id${key}, h.status, d.dead_letter_reason AS reason, h.attempts
  FROM ${n.qualifiedTable} h LEFT JOIN ${n.qualifiedDetailsTable} d ON ${this.#same('d', 'h')}
  WHERE h.consumer = $1::text AND h.status = ANY($2::text[]) AND ($3::text[] IS NULL OR h.message_id = ANY($3::text[]))
    AND ($4::text IS NULL OR d.dead_letter_reason = $4::text)
    AND ($5::timestamptz IS NULL OR d.dead_lettered_at >= $5::timestamptz) AND ($6::timestamptz IS NULL OR d.dead_lettered_at < $6::timestamptz)
  ORDER BY h.message_id LIMIT $7::int
  FOR UPDATE OF h),
changed AS (
  UPDATE ${n.qualifiedTable} t SET status = $8::text, changed_at = now() FROM picked p WHERE ${this.#same('t', 'p')}
  RETURNING t.message_id),
audit AS (
  INSERT INTO ${n.qualifiedReplayTable} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
  SELECT $9::text, p.consumer, p.message_id, $10::text, now(), $8::text || ' ' || p.status || '/' || coalesce(p.reason, 'none') || ': ' || $11::text
  FROM picked p JOIN changed c ON c.message_id = p.message_id)
SELECT message_id, status, reason, attempts FROM picked ORDER BY message_id`,
      parameters: [
        r.consumer,
        FROM[action],
        r.messageIds ?? null,
        r.deadLetterReason ?? null,
        r.since ?? null,
        r.until ?? null,
        r.limit ?? null,
        to,
        r.actionId,
        r.requestedBy,
        r.reason,
      ],
    };
  }

  /**
   * One batch of the retention pruner: at most `$3` discarded or archived rows (and their details) whose act is
   * more than `$4` ms old, under the transaction's prune lock (`$1`); `$2` the consumer or NULL. Found through
   * the details' dead-letter index (every retired row was dead-lettered), not by reading the hot table. One
   * row: `locked`, `deleted`.
   */
  pruneBatch(): string {
    const n = this.#n;
    const key = n.layout === 'table' ? '' : ', h.day';
    return `WITH lock AS (SELECT pg_try_advisory_xact_lock($1::bigint) AS locked),
doomed AS (
  SELECT h.consumer, h.message_id${key} FROM ${n.qualifiedDetailsTable} d JOIN ${n.qualifiedTable} h ON ${this.#same('h', 'd')}, lock
  WHERE lock.locked AND d.dead_lettered_at IS NOT NULL AND ${this.#retiredBefore('h')}
  LIMIT $3::int FOR UPDATE OF h SKIP LOCKED),
gone AS (
  DELETE FROM ${n.qualifiedTable} t USING doomed x WHERE ${this.#same('t', 'x')} AND t.status IN ('discarded', 'archived')
  RETURNING t.consumer, t.message_id${n.layout === 'table' ? '' : ', t.day'}),
details AS (DELETE FROM ${n.qualifiedDetailsTable} t USING gone g WHERE ${this.#same('t', 'g')})
SELECT (SELECT locked FROM lock) AS locked, (SELECT count(*)::int FROM gone) AS deleted`;
  }

  /** The count a dry run of the retention pruner reports (`$2` consumer, `$4` retention ms). */
  pruneCount(): string {
    const n = this.#n;
    return `(SELECT count(*)::int FROM ${n.qualifiedDetailsTable} d JOIN ${n.qualifiedTable} h ON ${this.#same('h', 'd')}
  WHERE d.dead_lettered_at IS NOT NULL AND ${this.#retiredBefore('h')})`;
  }

  #retiredBefore(h: string): string {
    return `${h}.status IN ('discarded', 'archived') AND ${h}.changed_at < now() - make_interval(secs => $4::float8 / 1000)
    AND ($2::text IS NULL OR ${h}.consumer = $2::text)`;
  }

  /** Live dead letters per consumer: `consumer`, `count`, `oldest` (when the oldest was dead-lettered). */
  deadLetterAges(consumer: string | undefined): SqlStatement {
    const n = this.#n;
    return {
      sql: `SELECT h.consumer, count(*)::int AS count, min(d.dead_lettered_at) AS oldest
FROM ${n.qualifiedTable} h LEFT JOIN ${n.qualifiedDetailsTable} d ON ${this.#same('d', 'h')}
WHERE h.status = 'dead_lettered' AND ($1::text IS NULL OR h.consumer = $1::text) GROUP BY h.consumer ORDER BY h.consumer`,
      parameters: [consumer ?? null],
    };
  }

  /** The ages of `inboxkit status` per consumer (see `InboxAges`), and the database's clock. */
  ages(consumer: string | undefined): SqlStatement {
    const n = this.#n;
    return {
      sql: `SELECT h.consumer, min(coalesce(d.received_at, h.changed_at)) AS oldest,
  count(*) FILTER (WHERE h.status = 'completed' AND h.expires_at < now())::int AS expired,
  min(h.expires_at) FILTER (WHERE h.status = 'completed' AND h.expires_at < now()) AS oldest_expired,
  count(*) FILTER (WHERE d.replay_count > 0)::int AS replayed
FROM ${n.qualifiedTable} h LEFT JOIN ${n.qualifiedDetailsTable} d ON ${this.#same('d', 'h')}
WHERE $1::text IS NULL OR h.consumer = $1::text GROUP BY h.consumer ORDER BY h.consumer`,
      parameters: [consumer ?? null],
    };
  }

  /** The outcome of the last audit line of each id (`message_id`, `outcome`), ids without one absent. */
  lastAuditOutcomes(consumer: string, ids: readonly string[]): SqlStatement {
    return {
      sql: `SELECT DISTINCT ON (message_id) message_id, outcome FROM ${this.#n.qualifiedReplayTable}
WHERE consumer = $1::text AND message_id = ANY($2::text[]) ORDER BY message_id, at DESC, id DESC`,
      parameters: [consumer, ids],
    };
  }
}

/**
 * The schema change of the lifecycle (migration `inboxkit_0005_dead_letter_lifecycle`, both layouts, and
 * migrations/0007_dead_letter_lifecycle.sql): the hot row may be `discarded` or `archived`. The wider check
 * replaces the old one (on a partitioned inbox, on every partition); idempotent.
 */
export function deadLetterLifecycleStatements(n: InboxTableNames): string[] {
  const c = n.derived('_status_check');
  return [`ALTER TABLE ${n.qualifiedTable} DROP CONSTRAINT IF EXISTS ${c}, ADD CONSTRAINT ${c} ${STATUS_CHECK}`];
}

/** Going down: only the four states again (fails while a retired row exists: discard or prune them first). */
export function deadLetterLifecycleDownStatements(n: InboxTableNames): string[] {
  const c = n.derived('_status_check');
  return [
    `ALTER TABLE ${n.qualifiedTable} DROP CONSTRAINT IF EXISTS ${c}, ADD CONSTRAINT ${c} CHECK (status IN ('processing', 'failed', 'completed', 'dead_lettered'))`,
  ];
}
