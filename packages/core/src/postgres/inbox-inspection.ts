// The read-only views of the Postgres inbox (the CLI's `status` and `dlq`, tests) and its pruning, over the
// seam: the part of PostgresInboxStore that is not on the message path. A row's fields are its hot row's with
// its details (if any).

import { createHash } from 'node:crypto';
import { isInboxkitError, StoreUnavailableError } from '../errors.js';
import {
  checkRetireRequest,
  DeadLetterLifecycleSql,
  DEFAULT_RETIRED_RETENTION_MS,
  type DeadLetterAge,
  type InboxAges,
  type RetireAction,
  type RetireDeadLettersRequest,
  type RetireDeadLettersResult,
} from './dead-letter-lifecycle.js';
import type {
  InboxInspector,
  InboxRow,
  InboxStatus,
  InspectionFilter,
  ProcessingRow,
  PruneOptions,
  PruneResult,
  ReasonCount,
  ReplayAuditRow,
  StatusCount,
} from '../store.js';
import { row } from './inbox-answer.js';
import { rowJson } from './inbox-schema.js';
import type { InboxTableNames } from './inbox-table-names.js';
import { pruneStatements, type PruneStatements } from './partitions/prune-statements.js';
import { sqlState, type SqlRow, type SqlSeam, type SqlStatement } from './sql-seam.js';
import { OPERATOR_LOCK_TIMEOUT_MS } from './inbox-operator-sql.js';

const DEFAULT_LIMIT = 100;
const DEFAULT_PRUNE_BATCH = 5_000;

/** The inspection API and `prune` of one inbox; every failure of the store is a `StoreUnavailableError`. */
export class InboxInspection implements InboxInspector {
  /** The validated table names. */
  readonly names: InboxTableNames;
  /**
   * The advisory lock key of `prune` (one batch at a time). `SELECT pg_advisory_lock(key)` from a session
   * pauses pruning until it unlocks.
   */
  readonly pruneLockKey: bigint;
  readonly #seam: SqlSeam<unknown>;
  readonly #n: InboxTableNames;
  readonly #pruneKey: string;
  readonly #prune: PruneStatements;
  readonly #lifecycle: DeadLetterLifecycleSql;
  /** `SELECT <row json> AS row FROM <hot> h LEFT JOIN <details> d …`, then the conditions. */
  readonly #rows: string;
  /** ` AND d.day = h.day` in the partitioned layout. */
  readonly #sameDay: string;

  constructor(seam: SqlSeam<unknown>, names: InboxTableNames) {
    this.#seam = seam;
    this.names = this.#n = names;
    this.pruneLockKey = createHash('sha256').update(`inboxkit:prune:${names.qualifiedTable}`).digest().readBigInt64BE(0);
    this.#pruneKey = this.pruneLockKey.toString();
    this.#prune = pruneStatements(names);
    this.#lifecycle = new DeadLetterLifecycleSql(names);
    // In `daily-partitions` the key includes the day: one id may have rows on two days (a re-stamped resend
    // without the cross-day check), and each has its own details.
    this.#sameDay = names.layout === 'table' ? '' : ' AND d.day = h.day';
    this.#rows = `SELECT ${rowJson('h', 'd')} AS row FROM ${names.qualifiedTable} h
  LEFT JOIN ${names.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id${this.#sameDay}`;
  }

  /** Runs one statement on the pool; a failure becomes a `StoreUnavailableError`. */
  protected async query(statement: SqlStatement | string, parameters: readonly unknown[] = []): Promise<SqlRow[]> {
    try {
      return await this.#seam.query(typeof statement === 'string' ? { sql: statement, parameters } : statement);
    } catch (error) {
      throw storeUnavailable(error);
    }
  }

  /** The database's clock, which expiry, leases and retry times are measured on (for the late-message rule). */
  async now(): Promise<Date> {
    const [r] = await this.query('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms');
    return new Date(Number(r?.['ms']));
  }

  async findRows(consumer: string, messageIds: readonly string[]): Promise<InboxRow[]> {
    if (messageIds.length === 0) return [];
    // One probe of the key per id, whatever the statistics know of the consumer (see the batch claim).
    const rows = await this.query(
      `SELECT ${rowJson('h', 'd')} AS row FROM unnest($2::text[]) AS i(id)
  CROSS JOIN LATERAL (SELECT * FROM ${this.#n.qualifiedTable} x WHERE x.consumer = $1::text AND x.message_id = i.id OFFSET 0) h
  LEFT JOIN ${this.#n.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id${this.#sameDay}`,
      [consumer, messageIds],
    );
    return rows.map((r) => row(r['row']));
  }

  async countByStatus(filter: { readonly consumer?: string } = {}): Promise<StatusCount[]> {
    const rows = await this.query(
      `SELECT consumer, status, count(*)::int AS count FROM ${this.#n.qualifiedTable}
WHERE $1::text IS NULL OR consumer = $1::text GROUP BY consumer, status ORDER BY consumer, status`,
      [filter.consumer ?? null],
    );
    return rows.map((r) => ({ consumer: String(r['consumer']), status: r['status'] as InboxStatus, count: Number(r['count']) }));
  }

  async countDeadLettersByReason(filter: { readonly consumer?: string } = {}): Promise<ReasonCount[]> {
    const rows = await this.query(
      `SELECT h.consumer, coalesce(d.dead_letter_reason, 'unknown') AS reason, count(*)::int AS count
FROM ${this.#n.qualifiedDetailsTable} d JOIN ${this.#n.qualifiedTable} h ON h.consumer = d.consumer AND h.message_id = d.message_id${this.#sameDay}
WHERE h.status = 'dead_lettered' AND ($1::text IS NULL OR d.consumer = $1::text) GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2`,
      [filter.consumer ?? null],
    );
    return rows.map((r) => ({ consumer: String(r['consumer']), reason: String(r['reason']), count: Number(r['count']) }));
  }

  async listDeadLetters(
    filter: InspectionFilter & { readonly reason?: string; readonly since?: Date; readonly until?: Date } = {},
  ): Promise<InboxRow[]> {
    const rows = await this.query(
      `${this.#rows}
WHERE h.status = 'dead_lettered' AND ($1::text IS NULL OR h.consumer = $1::text) AND ($2::text IS NULL OR d.dead_letter_reason = $2::text)
  AND ($3::timestamptz IS NULL OR d.dead_lettered_at >= $3::timestamptz) AND ($4::timestamptz IS NULL OR d.dead_lettered_at < $4::timestamptz)
ORDER BY d.dead_lettered_at DESC NULLS LAST, h.consumer, h.message_id LIMIT $5::int`,
      [filter.consumer ?? null, filter.reason ?? null, filter.since ?? null, filter.until ?? null, limitOf(filter)],
    );
    return rows.map((r) => row(r['row']));
  }

  async listProcessing(filter: InspectionFilter = {}): Promise<ProcessingRow[]> {
    const rows = await this.query(
      `${this.#rows.replace(' AS row', ` AS row,
  CASE WHEN d.lease_token IS NULL THEN 'none' WHEN d.locked_until > now() THEN 'live' ELSE 'expired' END AS lease,
  greatest(0, extract(epoch FROM (now() - coalesce(d.received_at, h.changed_at))) * 1000)::float8 AS age_ms`)}
WHERE h.status = 'processing' AND ($1::text IS NULL OR h.consumer = $1::text)
ORDER BY coalesce(d.received_at, h.changed_at), h.consumer, h.message_id LIMIT $2::int`,
      [filter.consumer ?? null, limitOf(filter)],
    );
    return rows.map((r) => ({ ...row(r['row']), lease: r['lease'] as ProcessingRow['lease'], ageMs: Math.round(Number(r['age_ms'])) }));
  }

  async countExpiringSoon(filter: { readonly withinMs: number; readonly consumer?: string }): Promise<{ consumer: string; count: number }[]> {
    const rows = await this.query(
      `SELECT consumer, count(*)::int AS count FROM ${this.#n.qualifiedTable}
WHERE status = 'completed' AND expires_at < now() + make_interval(secs => $1::float8 / 1000) AND ($2::text IS NULL OR consumer = $2::text)
GROUP BY consumer ORDER BY consumer`,
      [Math.max(0, Math.round(filter.withinMs)), filter.consumer ?? null],
    );
    return rows.map((r) => ({ consumer: String(r['consumer']), count: Number(r['count']) }));
  }

  async listReplays(
    filter: InspectionFilter & { readonly messageId?: string; readonly replayId?: string } = {},
  ): Promise<ReplayAuditRow[]> {
    const rows = await this.query(
      `SELECT replay_id, consumer, message_id, requested_by, requested_at, at, outcome FROM ${this.#n.qualifiedReplayTable}
WHERE ($1::text IS NULL OR consumer = $1::text) AND ($2::text IS NULL OR message_id = $2::text) AND ($3::text IS NULL OR replay_id = $3::text)
ORDER BY at DESC, id DESC LIMIT $4::int`,
      [filter.consumer ?? null, filter.messageId ?? null, filter.replayId ?? null, limitOf(filter)],
    );
    return rows.map((r) => ({
      replayId: String(r['replay_id']),
      consumer: String(r['consumer']),
      messageId: String(r['message_id']),
      requestedBy: typeof r['requested_by'] === 'string' ? r['requested_by'] : undefined,
      requestedAt: timestamp(r['requested_at']),
      at: timestamp(r['at']) ?? new Date(0),
      outcome: String(r['outcome']),
    }));
  }

  /**
   * Deletes expired completed rows (and their details), a batch per statement. Each batch takes the prune lock
   * for its own transaction (`pg_try_advisory_xact_lock`), so no two batches run at once; a run that finds it
   * taken stops and answers `locked` (with what it deleted so far). In the partitioned layout only the undated
   * and default partitions are pruned this way; a day's partition is dropped whole (`maintainInboxPartitions`).
   */
  async prune(options: PruneOptions = {}): Promise<PruneResult> {
    const batchSize = options.batchSize ?? DEFAULT_PRUNE_BATCH;
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize must be a positive integer');
    const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
    const consumer = options.consumer ?? null;
    const retention = options.retiredRetentionMs ?? DEFAULT_RETIRED_RETENTION_MS;
    if (!Number.isFinite(retention) || retention < 0) throw new RangeError('retiredRetentionMs must be a non-negative number of milliseconds');
    if (options.dryRun === true) {
      const [r] = await this.query(
        `SELECT pg_try_advisory_xact_lock($1::bigint) AS locked, ${this.#prune.count} AS count, ${this.#lifecycle.pruneCount()} AS retired
FROM (SELECT $3::int, $4::float8) AS unused`,
        [this.#pruneKey, consumer, batchSize, retention],
      );
      if (r?.['locked'] !== true) return { status: 'locked', deleted: 0, batches: 0 };
      const retired = Number(r['retired']);
      return { status: 'dry-run', deleted: Number(r['count']) + retired, batches: 0, ...retiredOf(retired) };
    }
    let deleted = 0;
    let retired = 0;
    let batches = 0;
    // Expired completed rows first, then the retired dead letters past their retention, each a batch at a time.
    for (const [statement, parameters] of [
      [this.#prune.batch, [this.#pruneKey, consumer, batchSize]],
      [this.#lifecycle.pruneBatch(), [this.#pruneKey, consumer, batchSize, retention]],
    ] as const) {
      while (batches < maxBatches) {
        const [r] = await this.query(statement, parameters);
        if (r?.['locked'] !== true) {
          return batches === 0 ? { status: 'locked', deleted: 0, batches: 0 } : { status: 'pruned', deleted, batches, ...retiredOf(retired) };
        }
        const n = Number(r['deleted']);
        const retiring = statement !== this.#prune.batch;
        // A retention pass that finds nothing is not counted: `batches` stays what it was before retired rows.
        if (!retiring || n > 0) batches++;
        deleted += n;
        if (retiring) retired += n;
        if (n < batchSize) break;
      }
    }
    return { status: 'pruned', deleted, batches, ...retiredOf(retired) };
  }

  /**
   * Discards dead letters: each selected `dead_lettered` (or `archived`) row becomes `discarded` — it will never
   * run, and a redelivery of its id is a duplicate (reason `discarded`) until `prune` deletes it after
   * `retiredRetentionMs` — and gets an audit line (who, why, when, its state and dead-letter reason before) in
   * the same statement. Rows in any other state are left alone. A delivery holding a selected row past 5 s is
   * a `StoreUnavailableError` and nothing changes; bad input is a `RangeError` and nothing changes.
   *
   * @example
   * const { changed } = await store.discardDeadLetters({
   *   consumer: 'billing', deadLetterReason: 'payload-mismatch', requestedBy: 'ana', reason: 'test traffic', actionId: randomUUID(),
   * });
   */
  discardDeadLetters(request: RetireDeadLettersRequest): Promise<RetireDeadLettersResult> {
    return this.#retire('discard', request);
  }

  /**
   * Archives dead letters: each selected `dead_lettered` row becomes `archived` — kept with its details as a
   * record, out of the live views (`listDeadLetters`, the dead-letter gauges), a redelivery a duplicate (reason
   * `archived`) — with an audit line in the same statement, as `discardDeadLetters`. `prune` deletes archived
   * rows after `retiredRetentionMs`.
   *
   * @example
   * await store.archiveDeadLetters({ consumer: 'billing', messageIds: ['order-7'], requestedBy: 'ana', reason: 'refunded by hand', actionId: randomUUID() });
   */
  archiveDeadLetters(request: RetireDeadLettersRequest): Promise<RetireDeadLettersResult> {
    return this.#retire('archive', request);
  }

  async #retire(action: RetireAction, request: RetireDeadLettersRequest): Promise<RetireDeadLettersResult> {
    checkRetireRequest(request);
    try {
      const rows = await this.#seam.transaction<SqlRow[]>(
        async (t) => ({ end: request.dryRun === true ? 'rollback' : 'commit', value: await t.query(this.#lifecycle.retire(action, request)) }),
        { first: { sql: `SELECT set_config('lock_timeout', $1::text, true)`, parameters: [String(OPERATOR_LOCK_TIMEOUT_MS)] } },
      );
      return {
        action,
        actionId: request.actionId,
        dryRun: request.dryRun === true,
        changed: rows.map((r) => ({
          consumer: request.consumer,
          messageId: String(r['message_id']),
          priorStatus: r['status'] as InboxStatus,
          deadLetterReason: typeof r['reason'] === 'string' ? r['reason'] : null,
          attempts: Number(r['attempts']),
        })),
      };
    } catch (error) {
      if (sqlState(error) === '55P03') {
        throw new StoreUnavailableError('a delivery holds one of the selected inbox rows: nothing was changed; try again in a moment', { cause: error });
      }
      throw storeUnavailable(error);
    }
  }

  /**
   * The dead letters still in the live views, per consumer: how many, and when the oldest was dead-lettered
   * (what the dead-letter gauges report; `observeDeadLetters`).
   */
  async deadLetterAges(filter: { readonly consumer?: string } = {}): Promise<DeadLetterAge[]> {
    const rows = await this.query(this.#lifecycle.deadLetterAges(filter.consumer));
    return rows.map((r) => ({ consumer: String(r['consumer']), count: Number(r['count']), oldestAt: timestamp(r['oldest']) }));
  }

  /** Per consumer: the oldest row's first receipt, expired completed rows not yet pruned, replayed rows. */
  async inboxAges(filter: { readonly consumer?: string } = {}): Promise<InboxAges[]> {
    const rows = await this.query(this.#lifecycle.ages(filter.consumer));
    return rows.map((r) => ({
      consumer: String(r['consumer']),
      oldestAt: timestamp(r['oldest']),
      expired: Number(r['expired']),
      oldestExpiredAt: timestamp(r['oldest_expired']),
      replayed: Number(r['replayed']),
    }));
  }

  /**
   * The outcome of the latest audit line (replay, amendment, forget, discard, archive) of each of `ids`; ids
   * with none are absent. Reads 1,000 ids a statement.
   */
  async lastAuditOutcomes(consumer: string, ids: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const unique = [...new Set(ids)];
    for (let i = 0; i < unique.length; i += 1_000) {
      for (const r of await this.query(this.#lifecycle.lastAuditOutcomes(consumer, unique.slice(i, i + 1_000)))) {
        out.set(String(r['message_id']), String(r['outcome']));
      }
    }
    return out;
  }
}

/** A timestamptz as the driver gave it (a `Date` from node-postgres, text elsewhere). */
function timestamp(value: unknown): Date | undefined {
  if (value instanceof Date) return value;
  return typeof value === 'string' || typeof value === 'number' ? new Date(value) : undefined;
}

/** `retired` in a prune result only when some were (so a store without retired rows answers as before). */
function retiredOf(retired: number): { retired?: number } {
  return retired > 0 ? { retired } : {};
}

function limitOf(filter: InspectionFilter): number {
  const limit = filter.limit ?? DEFAULT_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  return limit;
}

/** A failure of the store as the consumer expects it: a `StoreUnavailableError` (retry), unless it is one of ours. */
export function storeUnavailable(error: unknown): Error {
  if (isInboxkitError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(`the inbox store failed: ${message}`, { cause: error });
}
