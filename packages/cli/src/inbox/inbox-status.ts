// The facts `inboxkit status` shows, per consumer, all from core's inspection API (counts by status, dead
// letters by reason, processing rows with their lease, expiring rows, the ages, the replay audit), so they are
// read as the store that writes them reads them, in either layout.

import { INBOX_STATUSES, type InboxStatus } from '@inboxkit/core';
import type { Kysely } from 'kysely';

import { openInboxStore } from './inbox-store.js';
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
  const store = await openInboxStore(db, options);
  const expiringWithinMs = options.expiringWithinMs ?? 3_600_000;
  const dedupeWindowMs = options.dedupeWindowMs ?? 7 * 86_400_000;
  const filter = options.consumer === undefined ? {} : { consumer: options.consumer };

  const [counts, reasons, expiring] = await Promise.all([
    store.countByStatus(filter),
    store.countDeadLettersByReason(filter),
    store.countExpiringSoon({ ...filter, withinMs: expiringWithinMs }),
  ]);
  const [ages, dbNow] = await Promise.all([store.inboxAges(filter), store.now()]);

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
        pruneLagMs: age?.oldestExpiredAt === undefined ? undefined : dbNow.getTime() - age.oldestExpiredAt.getTime(),
        oldestRowAgeMs: age?.oldestAt === undefined ? undefined : dbNow.getTime() - age.oldestAt.getTime(),
        oldestBeyondWindow: age?.oldestAt !== undefined && dbNow.getTime() - age.oldestAt.getTime() > dedupeWindowMs,
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
