// The statements of deliberate acts rather than deliveries: the replay audit, and operators' acts on one inbox
// row (edit and retry, forget one id). An operator's act runs in a short transaction that first bounds its wait
// for a delivery holding the row, then locks the hot row and reads it with its details, and writes (the change
// and its audit line, in one statement) only if the row is what the act expects. In `daily-partitions` a row's
// key includes its `day` and one id may have a row on two days (a re-stamped resend without the cross-day
// check): the act takes the row in the state it acts on, joins that row's own details, and writes that day only.

import type { ForgetRequest, InboxStatus, PayloadAmendment, ReplayAuditEntry } from '../store.js';
import { rowJson } from './inbox-schema.js';
import type { InboxTableNames } from './inbox-table-names.js';
import type { SqlStatement } from './sql-seam.js';

/** How long an operator's act waits for a delivery holding the row before giving up. */
export const OPERATOR_LOCK_TIMEOUT_MS = 5_000;

/** The statements of `amendDeadLetter` and `forgetCompleted`. */
export class InboxOperatorSql {
  readonly #n: InboxTableNames;
  readonly #partitioned: boolean;

  constructor(names: InboxTableNames) {
    this.#n = names;
    this.#partitioned = names.layout !== 'table';
  }

  /** ` AND <alias>day = $<i>::date` in the partitioned layout (the day `lockRow` returned), else nothing. */
  #onDay(i: number, alias = ''): string {
    return this.#partitioned ? ` AND ${alias}day = $${i}::date` : '';
  }

  /** The day parameter after the others, in the partitioned layout. */
  #dayParameter(day: string | undefined): unknown[] {
    if (!this.#partitioned) return [];
    if (day === undefined) throw new Error('inboxkit: an operator act on the partitioned inbox needs the day of the row lockRow returned');
    return [day];
  }

  /** A replay's audit line. */
  replayAudit(e: ReplayAuditEntry): SqlStatement {
    return {
      sql: `INSERT INTO ${this.#n.qualifiedReplayTable} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::timestamptz, $6::text)`,
      parameters: [e.replayId, e.consumer, e.messageId, e.requestedBy ?? null, e.requestedAt ?? null, e.outcome],
    };
  }

  /** Bounds every lock wait of the transaction (run first). */
  lockTimeout(): SqlStatement {
    return { sql: `SELECT set_config('lock_timeout', $1::text, true)`, parameters: [String(OPERATOR_LOCK_TIMEOUT_MS)] };
  }

  /**
   * The row of one id, its hot row locked: one row `row` (json) and `day` (text; the partitioned layout's key,
   * `null` in `table`), or none. Of an id's rows on several days, the one in state `wanted` (the latest such
   * day), else the latest day's, is taken, with the details of its own day.
   */
  lockRow(consumer: string, messageId: string, wanted: InboxStatus): SqlStatement {
    if (!this.#partitioned) {
      return {
        sql: `SELECT ${rowJson('h', 'd')} AS row, NULL::text AS day FROM ${this.#n.qualifiedTable} h
  LEFT JOIN ${this.#n.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id
WHERE h.consumer = $1::text AND h.message_id = $2::text
FOR UPDATE OF h`,
        parameters: [consumer, messageId],
      };
    }
    return {
      sql: `SELECT ${rowJson('h', 'd')} AS row, h.day::text AS day FROM ${this.#n.qualifiedTable} h
  LEFT JOIN ${this.#n.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id AND d.day = h.day
WHERE h.consumer = $1::text AND h.message_id = $2::text
ORDER BY h.status = $3::text DESC, h.day DESC LIMIT 1
FOR UPDATE OF h`,
      parameters: [consumer, messageId, wanted],
    };
  }

  /** The amended fingerprint and its audit line (`outcome`), on the row (of `day`) locked by `lockRow`. */
  amend(a: PayloadAmendment, outcome: string, day: string | undefined): SqlStatement {
    return {
      sql: `WITH changed AS (
  UPDATE ${this.#n.qualifiedTable} SET fingerprint = $3::text
  WHERE consumer = $1::text AND message_id = $2::text AND status = 'dead_lettered'${this.#onDay(7)}
  RETURNING consumer, message_id)
INSERT INTO ${this.#n.qualifiedReplayTable} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
SELECT $4::text, consumer, message_id, $5::text, now(), $6::text FROM changed`,
      parameters: [a.consumer, a.messageId, a.toFingerprint, a.replayId, a.requestedBy, outcome, ...this.#dayParameter(day)],
    };
  }

  /**
   * Deletes the completed row (of `day`) locked by `lockRow` and its details, and appends the audit line
   * (`outcome`).
   */
  forget(r: ForgetRequest, outcome: string, day: string | undefined): SqlStatement {
    return {
      sql: `WITH gone AS (
  DELETE FROM ${this.#n.qualifiedTable} WHERE consumer = $1::text AND message_id = $2::text AND status = 'completed'${this.#onDay(6)}
  RETURNING consumer, message_id),
details AS (
  DELETE FROM ${this.#n.qualifiedDetailsTable} d USING gone WHERE d.consumer = gone.consumer AND d.message_id = gone.message_id${this.#onDay(6, 'd.')})
INSERT INTO ${this.#n.qualifiedReplayTable} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
SELECT $3::text, consumer, message_id, $4::text, now(), $5::text FROM gone`,
      parameters: [r.consumer, r.messageId, r.actionId, r.requestedBy, outcome, ...this.#dayParameter(day)],
    };
  }
}
