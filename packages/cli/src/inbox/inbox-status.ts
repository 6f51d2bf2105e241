// The facts `inboxkit status` shows, per consumer. Most come from core's inspection API (counts by status,
// dead letters by reason, processing rows with their lease, expiring rows, the replay audit); the ages it does
// not offer (prune lag, oldest row) come from one aggregate query here.

import type { InboxStatus } from '@inboxkit/core';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';

import { inboxStore } from './inbox-store.js';
import type { InboxTableName } from './inbox-store.js';

/** Options of `inboxStatus()`. */
export interface InboxStatusOptions extends InboxTableName {
  /** Only this consumer. Default: every consumer. */
  readonly consumer?: string | undefined;
  /** Completed rows whose `expires_at` falls within this many ms count as expiring soon. Default is 3,600,000 (1 h). */
  readonly expiringWithinMs?: number | undefined;
  /** The consumers' dedupe window, to compare the oldest row's age with. Default is 7 days. */
  readonly dedupeWindowMs?: number | undefined;
}

/** The oldest row in `processing` of a consumer. */
export interface OldestProcessing {
  readonly messageId: string;
  readonly receivedAt: Date;
  readonly ageMs: number;
  /** `undefined` without a lease (transactional mode, or an attempt recorded as started). */
  readonly lockedUntil: Date | undefined;
  /** `live`: a worker holds it; `expired`: the next delivery takes it over; `none`: no lease. */
  readonly lease: 'live' | 'expired' | 'none';
}

/** The most recent replay audit line of a consumer. */
export interface LastReplay {
  readonly replayId: string;
  readonly requestedBy: string | undefined;
  readonly at: Date;
  /** What the delivery did (`reopened processed`, `skipped-completed duplicate` …). */
  readonly outcome: string;
}

/** One consumer's inbox. */
export interface ConsumerStatus {
  readonly consumer: string;
  readonly rows: Readonly<Record<InboxStatus, number>>;
  readonly total: number;
  readonly oldestProcessing: OldestProcessing | undefined;
  /** Dead-lettered rows by reason. */
  readonly deadLettersByReason: Readonly<Record<string, number>>;
  /** Completed rows that expire within `expiringWithinMs` (not yet expired). */
  readonly expiringSoon: number;
  /** Completed rows already past `expires_at` and not yet pruned. */
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
  /** The most recent line of the replay audit. */
  readonly lastReplay: LastReplay | undefined;
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

// core exports its INBOX_STATUSES as a type only; the four states of DESIGN §3.
const INBOX_STATUSES: readonly InboxStatus[] = ['processing', 'completed', 'failed', 'dead_lettered'];

interface AgeRow {
  consumer: string;
  oldest: Date | null;
  expired: number;
  oldest_expired: Date | null;
  replayed: number;
  now: Date;
}

/**
 * Reads the inbox's state per consumer: rows by status, the oldest processing row and its lease, dead letters
 * by reason, rows expiring soon, expired rows not yet pruned (prune lag), the oldest row's age against the
 * window, and the latest replay from the audit.
 *
 * @example
 * const report = await inboxStatus(db, { schema: 'app', consumer: 'orders' });
 * console.log(report.consumers[0]?.rows.dead_lettered);
 */
export async function inboxStatus(
  db: Kysely<unknown>,
  options: InboxStatusOptions = {},
): Promise<InboxStatusReport> {
  const store = inboxStore(db, options);
  const expiringWithinMs = options.expiringWithinMs ?? 3_600_000;
  const dedupeWindowMs = options.dedupeWindowMs ?? 7 * 86_400_000;
  const filter = options.consumer === undefined ? {} : { consumer: options.consumer };

  const [counts, reasons, expiring] = await Promise.all([
    store.countByStatus(filter),
    store.countDeadLettersByReason(filter),
    store.countExpiringSoon({ ...filter, withinMs: expiringWithinMs }),
  ]);
  const only = options.consumer === undefined ? sql`true` : sql`h.consumer = ${options.consumer}`;
  // A row's first receipt is its details' (rows that took a rare path), else when it took its status.
  const { rows: ages } = await sql<AgeRow>`
    select h.consumer, min(coalesce(d.received_at, h.changed_at)) as oldest,
           count(*) filter (where h.status = 'completed' and h.expires_at < now())::int as expired,
           min(h.expires_at) filter (where h.status = 'completed' and h.expires_at < now()) as oldest_expired,
           count(*) filter (where d.replay_count > 0)::int as replayed,
           now() as now
    from ${sql.table(`${store.names.schema}.${store.names.table}`)} h
      left join ${sql.table(`${store.names.schema}.${store.names.detailsTable}`)} d
        on d.consumer = h.consumer and d.message_id = h.message_id
    where ${only}
    group by h.consumer`.execute(db);
  const dbNow = ages[0]?.now ?? new Date();

  const consumers = [...new Set(counts.map((c) => c.consumer))].sort();
  const statuses = await Promise.all(
    consumers.map(async (consumer): Promise<ConsumerStatus> => {
      const rows = Object.fromEntries(INBOX_STATUSES.map((s) => [s, 0])) as Record<InboxStatus, number>;
      for (const c of counts) if (c.consumer === consumer) rows[c.status] = c.count;
      const age = ages.find((a) => a.consumer === consumer);
      const [processing] = rows.processing > 0 ? await store.listProcessing({ consumer, limit: 1 }) : [];
      const [replay] = await store.listReplays({ consumer, limit: 1 });
      const expired = age?.expired ?? 0;
      return {
        consumer,
        rows,
        total: INBOX_STATUSES.reduce((sum, s) => sum + rows[s], 0),
        oldestProcessing:
          processing === undefined
            ? undefined
            : {
                messageId: processing.messageId,
                receivedAt: processing.receivedAt,
                ageMs: processing.ageMs,
                lockedUntil: processing.lockedUntil ?? undefined,
                lease: processing.lease,
              },
        deadLettersByReason: Object.fromEntries(
          reasons.filter((r) => r.consumer === consumer).map((r) => [r.reason, r.count]),
        ),
        // core counts already-expired rows as expiring: keep those apart (they are prune lag).
        expiringSoon: Math.max(0, (expiring.find((e) => e.consumer === consumer)?.count ?? 0) - expired),
        expiredNotPruned: expired,
        pruneLagMs: age?.oldest_expired == null ? undefined : dbNow.getTime() - age.oldest_expired.getTime(),
        oldestRowAgeMs: age?.oldest == null ? undefined : dbNow.getTime() - age.oldest.getTime(),
        oldestBeyondWindow: age?.oldest != null && dbNow.getTime() - age.oldest.getTime() > dedupeWindowMs,
        replayed: age?.replayed ?? 0,
        lastReplay:
          replay === undefined
            ? undefined
            : {
                replayId: replay.replayId,
                requestedBy: replay.requestedBy,
                at: replay.at,
                outcome: replay.outcome,
              },
      };
    }),
  );
  return {
    at: dbNow,
    table: `${store.names.schema}.${store.names.table}`,
    expiringWithinMs,
    dedupeWindowMs,
    consumers: statuses,
  };
}
