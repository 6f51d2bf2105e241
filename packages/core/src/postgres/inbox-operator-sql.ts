// The statements of deliberate acts rather than deliveries: the replay audit, and operators' acts on one inbox
// row (edit and retry, forget one id). An operator's act runs in a short transaction that first bounds its wait
// for a delivery holding the row, then locks the hot row and reads it with its details, and writes (the change
// and its audit line, in one statement) only if the row is what the act expects.

import type { ForgetRequest, PayloadAmendment, ReplayAuditEntry } from '../store.js';
import { rowJson } from './inbox-schema.js';
import type { InboxTableNames } from './inbox-table-names.js';
import type { SqlStatement } from './sql-seam.js';

/** How long an operator's act waits for a delivery holding the row before giving up. */
export const OPERATOR_LOCK_TIMEOUT_MS = 5_000;

/** The statements of `amendDeadLetter` and `forgetCompleted`. */
export class InboxOperatorSql {
  readonly #n: InboxTableNames;

  constructor(names: InboxTableNames) {
    this.#n = names;
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

  /** The row of one id, its hot row locked: one row `row` (json), or none. */
  lockRow(consumer: string, messageId: string): SqlStatement {
    return {
      sql: `SELECT ${rowJson('h', 'd')} AS row FROM ${this.#n.qualifiedTable} h
  LEFT JOIN ${this.#n.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id
WHERE h.consumer = $1::text AND h.message_id = $2::text
FOR UPDATE OF h`,
      parameters: [consumer, messageId],
    };
  }

  /** The amended fingerprint and its audit line (`outcome`), on the row locked by `lockRow`. */
  amend(a: PayloadAmendment, outcome: string): SqlStatement {
    return {
      sql: `WITH changed AS (
  UPDATE ${this.#n.qualifiedTable} SET fingerprint = $3::text
  WHERE consumer = $1::text AND message_id = $2::text AND status = 'dead_lettered'
  RETURNING consumer, message_id)
INSERT INTO ${this.#n.qualifiedReplayTable} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
SELECT $4::text, consumer, message_id, $5::text, now(), $6::text FROM changed`,
      parameters: [a.consumer, a.messageId, a.toFingerprint, a.replayId, a.requestedBy, outcome],
    };
  }

  /** Deletes the completed row locked by `lockRow` and its details, and appends the audit line (`outcome`). */
  forget(r: ForgetRequest, outcome: string): SqlStatement {
    return {
      sql: `WITH gone AS (
  DELETE FROM ${this.#n.qualifiedTable} WHERE consumer = $1::text AND message_id = $2::text AND status = 'completed'
  RETURNING consumer, message_id),
details AS (
  DELETE FROM ${this.#n.qualifiedDetailsTable} d USING gone WHERE d.consumer = gone.consumer AND d.message_id = gone.message_id)
INSERT INTO ${this.#n.qualifiedReplayTable} (replay_id, consumer, message_id, requested_by, requested_at, outcome)
SELECT $3::text, consumer, message_id, $4::text, now(), $5::text FROM gone`,
      parameters: [r.consumer, r.messageId, r.actionId, r.requestedBy, outcome],
    };
  }
}
