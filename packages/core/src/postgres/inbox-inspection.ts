// The read-only views of the Postgres inbox (the CLI's `status` and `dlq`, tests) and its pruning, over the
// seam: the part of PostgresInboxStore that is not on the message path. A row's fields are its hot row's with
// its details (if any).

import { createHash } from 'node:crypto';
import { isInboxkitError, StoreUnavailableError } from '../errors.js';
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
import type { SqlRow, SqlSeam, SqlStatement } from './sql-seam.js';

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
  /** `SELECT <row json> AS row FROM <hot> h LEFT JOIN <details> d …`, then the conditions. */
  readonly #rows: string;

  constructor(seam: SqlSeam<unknown>, names: InboxTableNames) {
    this.#seam = seam;
    this.names = this.#n = names;
    this.pruneLockKey = createHash('sha256').update(`inboxkit:prune:${names.qualifiedTable}`).digest().readBigInt64BE(0);
    this.#pruneKey = this.pruneLockKey.toString();
    this.#prune = pruneStatements(names);
    this.#rows = `SELECT ${rowJson('h', 'd')} AS row FROM ${names.qualifiedTable} h
  LEFT JOIN ${names.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id`;
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
  LEFT JOIN ${this.#n.qualifiedDetailsTable} d ON d.consumer = h.consumer AND d.message_id = h.message_id`,
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
FROM ${this.#n.qualifiedDetailsTable} d JOIN ${this.#n.qualifiedTable} h ON h.consumer = d.consumer AND h.message_id = d.message_id
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
    if (options.dryRun === true) {
      const [r] = await this.query(`SELECT pg_try_advisory_xact_lock($1::bigint) AS locked, ${this.#prune.count} AS count`, [this.#pruneKey, consumer]);
      return r?.['locked'] === true ? { status: 'dry-run', deleted: Number(r['count']), batches: 0 } : { status: 'locked', deleted: 0, batches: 0 };
    }
    let deleted = 0;
    let batches = 0;
    while (batches < maxBatches) {
      const [r] = await this.query(this.#prune.batch, [this.#pruneKey, consumer, batchSize]);
      if (r?.['locked'] !== true) return batches === 0 ? { status: 'locked', deleted: 0, batches: 0 } : { status: 'pruned', deleted, batches };
      const n = Number(r['deleted']);
      batches++;
      deleted += n;
      if (n < batchSize) break;
    }
    return { status: 'pruned', deleted, batches };
  }
}

/** A timestamptz as the driver gave it (a `Date` from node-postgres, text elsewhere). */
function timestamp(value: unknown): Date | undefined {
  if (value instanceof Date) return value;
  return typeof value === 'string' || typeof value === 'number' ? new Date(value) : undefined;
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
