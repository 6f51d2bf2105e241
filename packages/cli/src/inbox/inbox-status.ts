// The facts `inboxkit status` shows, per consumer, read from the inbox table in a handful of aggregate
// queries (each uses the primary key or the expires_at index; none scans row by row in JavaScript).

import { sql } from 'kysely';
import type { Kysely } from 'kysely';

import type { InboxRowStatus } from './inbox-lookup.js';
import type { InboxTableName } from './postgres-inbox-lookup.js';

/** Options of `inboxStatus()`. */
export interface InboxStatusOptions extends InboxTableName {
  /** Only this consumer. Default: every consumer. */
  readonly consumer?: string | undefined;
  /** Rows whose `expires_at` falls within this many ms count as expiring soon. Default is 3,600,000 (1 h). */
  readonly expiringWithinMs?: number | undefined;
  /** The consumers' dedupe window, to compare the oldest row's age with. Default is 7 days. */
  readonly dedupeWindowMs?: number | undefined;
  /** The replay audit table (in the same schema). Default is the inbox table's name + `_replays`. */
  readonly replayTable?: string | undefined;
}

/** The oldest row in `processing` of a consumer. */
export interface OldestProcessing {
  readonly messageId: string;
  readonly receivedAt: Date;
  /** `undefined` in transactional mode (no lease is written). */
  readonly lockedUntil: Date | undefined;
  /** True when the lease ran out: the next delivery takes the message over. */
  readonly leaseExpired: boolean;
}

/** One consumer's inbox. */
export interface ConsumerStatus {
  readonly consumer: string;
  readonly rows: Readonly<Record<InboxRowStatus, number>>;
  readonly total: number;
  readonly oldestProcessing: OldestProcessing | undefined;
  /** Dead-lettered rows by reason. */
  readonly deadLettersByReason: Readonly<Record<string, number>>;
  /** Completed rows that expire within `expiringWithinMs`. */
  readonly expiringSoon: number;
  /** Completed rows already past `expires_at` and not yet pruned (prune lag). */
  readonly expiredNotPruned: number;
  /** How long the oldest expired, unpruned completed row has been expired (prune lag). */
  readonly pruneLagMs: number | undefined;
  /** Age in ms of the oldest row (by `received_at`). */
  readonly oldestRowAgeMs: number | undefined;
  /**
   * True when the oldest row is older than the dedupe window. Normal for dead-lettered and failed rows (never
   * pruned by age); for completed rows see `pruneLagMs`.
   */
  readonly oldestBeyondWindow: boolean;
  /** Rows reopened by a replay at least once. */
  readonly replayed: number;
  /** The most recent line of the replay audit, when the audit table exists and has one. */
  readonly lastReplay: LastReplay | undefined;
}

/** The most recent replay audit line of a consumer. */
export interface LastReplay {
  readonly replayId: string;
  readonly requestedBy: string | undefined;
  readonly at: Date;
  /** Audit lines of that replay id for this consumer. */
  readonly messages: number;
}

/** The result of `inboxStatus()`. */
export interface InboxStatusReport {
  /** The database's clock when the report was taken. */
  readonly at: Date;
  readonly table: string;
  readonly expiringWithinMs: number;
  readonly dedupeWindowMs: number;
  readonly consumers: readonly ConsumerStatus[];
}

const STATUSES: readonly InboxRowStatus[] = ['processing', 'completed', 'failed', 'dead_lettered'];

/** The latest replay per consumer from the audit table; empty when the table does not exist (older schema). */
async function lastReplays(db: Kysely<unknown>, schema: string, replayTable: string, consumer: string | undefined): Promise<Map<string, LastReplay>> {
  const name = `${schema}.${replayTable}`;
  const { rows: exists } = await sql<{ t: string | null }>`select to_regclass(${`"${schema}"."${replayTable}"`})::text as t`.execute(db);
  if (exists[0]?.t == null) return new Map();
  const table = sql.table(name);
  const only = consumer === undefined ? sql`true` : sql`consumer = ${consumer}`;
  const { rows } = await sql<{ consumer: string; replay_id: string; requested_by: string | null; at: Date; n: string }>`
    select distinct on (l.consumer) l.consumer, l.replay_id, l.requested_by, l.at,
           (select count(*) from ${table} c where c.consumer = l.consumer and c.replay_id = l.replay_id) as n
    from ${table} l where ${only}
    order by l.consumer, l.at desc, l.id desc`.execute(db);
  return new Map(rows.map((r) => [r.consumer, { replayId: r.replay_id, requestedBy: r.requested_by ?? undefined, at: r.at, messages: Number(r.n) }]));
}

/**
 * Reads the inbox's state per consumer: rows by status, the oldest processing row and its lease, dead letters
 * by reason, rows expiring soon, expired rows not yet pruned (prune lag), the oldest row's age against the
 * window, and the latest replay from the audit table.
 *
 * @example
 * const report = await inboxStatus(db, { schema: 'app', consumer: 'orders' });
 * console.log(report.consumers[0]?.rows.dead_lettered);
 */
export async function inboxStatus(db: Kysely<unknown>, options: InboxStatusOptions = {}): Promise<InboxStatusReport> {
  const name = `${options.schema ?? 'inboxkit'}.${options.table ?? 'inbox'}`;
  const table = sql.table(name);
  const expiringWithinMs = options.expiringWithinMs ?? 3_600_000;
  const dedupeWindowMs = options.dedupeWindowMs ?? 7 * 86_400_000;
  const only = options.consumer === undefined ? sql`true` : sql`consumer = ${options.consumer}`;

  const { rows: nowRows } = await sql<{ now: Date }>`select now() as now`.execute(db);
  const at = nowRows[0]!.now;

  const { rows: counts } = await sql<{
    consumer: string;
    status: InboxRowStatus;
    n: string;
    oldest: Date | null;
    oldest_expired: Date | null;
    replayed: string;
    expiring: string;
    expired: string;
  }>`
    select consumer, status, count(*) as n, min(received_at) as oldest,
           min(expires_at) filter (where status = 'completed' and expires_at < now()) as oldest_expired,
           count(*) filter (where coalesce(replay_count, 0) > 0) as replayed,
           count(*) filter (where status = 'completed' and expires_at >= now()
                              and expires_at < now() + make_interval(secs => ${expiringWithinMs / 1000})) as expiring,
           count(*) filter (where status = 'completed' and expires_at < now()) as expired
    from ${table} where ${only} group by consumer, status order by consumer`.execute(db);

  const { rows: processing } = await sql<{ consumer: string; message_id: string; received_at: Date; locked_until: Date | null; expired: boolean }>`
    select distinct on (consumer) consumer, message_id, received_at, locked_until,
           coalesce(locked_until < now(), false) as expired
    from ${table} where status = 'processing' and ${only}
    order by consumer, received_at`.execute(db);

  const { rows: reasons } = await sql<{ consumer: string; reason: string | null; n: string }>`
    select consumer, dead_letter_reason as reason, count(*) as n
    from ${table} where status = 'dead_lettered' and ${only}
    group by consumer, dead_letter_reason`.execute(db);

  const replays = await lastReplays(db, options.schema ?? 'inboxkit', options.replayTable ?? `${options.table ?? 'inbox'}_replays`, options.consumer);

  const byConsumer = new Map<
    string,
    { rows: Record<InboxRowStatus, number>; oldest: Date | undefined; oldestExpired: Date | undefined; replayed: number; expiring: number; expired: number }
  >();
  for (const c of counts) {
    let s = byConsumer.get(c.consumer);
    if (s === undefined) {
      s = {
        rows: Object.fromEntries(STATUSES.map((st) => [st, 0])) as Record<InboxRowStatus, number>,
        oldest: undefined,
        oldestExpired: undefined,
        replayed: 0,
        expiring: 0,
        expired: 0,
      };
      byConsumer.set(c.consumer, s);
    }
    s.rows[c.status] = Number(c.n);
    if (c.oldest !== null && (s.oldest === undefined || c.oldest < s.oldest)) s.oldest = c.oldest;
    if (c.oldest_expired !== null) s.oldestExpired = c.oldest_expired;
    s.replayed += Number(c.replayed);
    s.expiring += Number(c.expiring);
    s.expired += Number(c.expired);
  }

  const consumers: ConsumerStatus[] = [...byConsumer.entries()].map(([consumer, s]) => {
    const p = processing.find((r) => r.consumer === consumer);
    return {
      consumer,
      rows: s.rows,
      total: STATUSES.reduce((sum, st) => sum + s.rows[st], 0),
      oldestProcessing:
        p === undefined
          ? undefined
          : { messageId: p.message_id, receivedAt: p.received_at, lockedUntil: p.locked_until ?? undefined, leaseExpired: p.expired },
      deadLettersByReason: Object.fromEntries(
        reasons.filter((r) => r.consumer === consumer).map((r) => [r.reason ?? 'unknown', Number(r.n)]),
      ),
      expiringSoon: s.expiring,
      expiredNotPruned: s.expired,
      pruneLagMs: s.oldestExpired === undefined ? undefined : at.getTime() - s.oldestExpired.getTime(),
      oldestRowAgeMs: s.oldest === undefined ? undefined : at.getTime() - s.oldest.getTime(),
      oldestBeyondWindow: s.oldest !== undefined && at.getTime() - s.oldest.getTime() > dedupeWindowMs,
      replayed: s.replayed,
      lastReplay: replays.get(consumer),
    };
  });
  return { at, table: name, expiringWithinMs, dedupeWindowMs, consumers };
}
