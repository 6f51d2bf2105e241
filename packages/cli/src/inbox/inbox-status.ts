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
  /** Age in ms of the oldest row (by `received_at`). */
  readonly oldestRowAgeMs: number | undefined;
  /** True when the oldest completed row is older than the dedupe window: pruning is behind. */
  readonly oldestBeyondWindow: boolean;
  /** Rows reopened by a replay at least once. */
  readonly replayed: number;
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

/**
 * Reads the inbox's state per consumer: rows by status, the oldest processing row and its lease, dead letters
 * by reason, rows expiring soon, expired rows not yet pruned, and the oldest row's age against the window.
 *
 * @example
 * const report = await inboxStatus(db, { schema: 'app', consumer: 'orders' });
 * console.log(report.consumers[0]?.rows.dead_lettered);
 */
export async function inboxStatus(db: Kysely<unknown>, options: InboxStatusOptions = {}): Promise<InboxStatusReport> {
  const name = `${options.schema ?? 'public'}.${options.table ?? 'inbox'}`;
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
    replayed: string;
    expiring: string;
    expired: string;
  }>`
    select consumer, status, count(*) as n, min(received_at) as oldest,
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

  const { rows: oldestCompleted } = await sql<{ consumer: string; oldest: Date }>`
    select consumer, min(received_at) as oldest from ${table}
    where status = 'completed' and ${only} group by consumer`.execute(db);

  const byConsumer = new Map<string, { rows: Record<InboxRowStatus, number>; oldest: Date | undefined; replayed: number; expiring: number; expired: number }>();
  for (const c of counts) {
    let s = byConsumer.get(c.consumer);
    if (s === undefined) {
      s = { rows: Object.fromEntries(STATUSES.map((st) => [st, 0])) as Record<InboxRowStatus, number>, oldest: undefined, replayed: 0, expiring: 0, expired: 0 };
      byConsumer.set(c.consumer, s);
    }
    s.rows[c.status] = Number(c.n);
    if (c.oldest !== null && (s.oldest === undefined || c.oldest < s.oldest)) s.oldest = c.oldest;
    s.replayed += Number(c.replayed);
    s.expiring += Number(c.expiring);
    s.expired += Number(c.expired);
  }

  const consumers: ConsumerStatus[] = [...byConsumer.entries()].map(([consumer, s]) => {
    const p = processing.find((r) => r.consumer === consumer);
    const completedOldest = oldestCompleted.find((r) => r.consumer === consumer)?.oldest;
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
      oldestRowAgeMs: s.oldest === undefined ? undefined : at.getTime() - s.oldest.getTime(),
      oldestBeyondWindow: completedOldest !== undefined && at.getTime() - completedOldest.getTime() > dedupeWindowMs,
      replayed: s.replayed,
    };
  });
  return { at, table: name, expiringWithinMs, dedupeWindowMs, consumers };
}
