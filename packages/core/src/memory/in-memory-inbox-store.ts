// The inbox in process memory, for unit tests and examples. SINGLE PROCESS ONLY: it is forgotten on exit and not
// shared between processes, so it gives no guarantee in production. It follows the Postgres store's semantics
// exactly (the store conformance suite runs against both), with a clock tests can move.

import { randomUUID } from 'node:crypto';
import { StoreUnavailableError } from '../errors.js';
import { amendmentOutcome, forgetOutcome } from '../operator-audit.js';
import type {
  AmendmentResult,
  BatchRun,
  ClaimedDelivery,
  ClaimedFrom,
  ClaimRequest,
  ClaimSettings,
  FailureRecord,
  FailureWrite,
  ForgetRequest,
  ForgetResult,
  InboxRow,
  InboxRowState,
  InboxStatus,
  InboxStore,
  InspectionFilter,
  LeaseClaim,
  LeaseRun,
  PayloadAmendment,
  ProcessingRow,
  PruneOptions,
  PruneResult,
  ReasonCount,
  ReplayAuditEntry,
  ReplayAuditRow,
  StatusCount,
  TransactionalRun,
} from '../store.js';
import { InMemoryTransaction, type InMemoryEffect, type TransactionSink } from './in-memory-transaction.js';
import { KeyLocks } from './key-locks.js';

/** Options of `InMemoryInboxStore`. */
export interface InMemoryInboxStoreOptions {
  /** The store's clock in epoch milliseconds; tests pass one they can advance. Default is `Date.now`. */
  readonly clock?: () => number;
}

type Row = { -readonly [K in keyof InboxRow]: InboxRow[K] };

/** What a claim decided for one delivery. */
type Decision =
  | { readonly kind: 'claim'; readonly next: Row; readonly claimed: ClaimedDelivery }
  | { readonly kind: 'exhausted'; readonly next: Row }
  | { readonly kind: 'not-claimed' };

const DEFAULT_LIMIT = 100;
/** How long an operator's act waits for a delivery holding the row. */
const OPERATOR_LOCK_TIMEOUT_MS = 5_000;

/**
 * An `InboxStore` in memory, for unit tests: single-process only, never for production. Handlers get an
 * `InMemoryTransaction` whose staged effects commit with the inbox record, so `store.effects` counts what was
 * applied.
 *
 * @example
 * let now = Date.now();
 * const store = new InMemoryInboxStore({ clock: () => now });
 * const consumer = idempotentConsumer({ name: 'test', store, handler: async (m, { tx }) => tx.stage(m.id) });
 * await consumer.handle(message);
 * now += 60_000; // move time for backoff and expiry
 */
export class InMemoryInboxStore implements InboxStore<InMemoryTransaction> {
  readonly kind = 'memory';
  readonly #rows = new Map<string, Row>();
  readonly #locks = new KeyLocks();
  readonly #effects: InMemoryEffect[] = [];
  readonly #replays: ReplayAuditRow[] = [];
  readonly #clock: () => number;
  #pruning = false;
  #available = true;

  readonly #identity = `memory:${randomUUID()}`;

  constructor(options: InMemoryInboxStoreOptions = {}) {
    this.#clock = options.clock ?? Date.now;
  }

  /** `memory:<uuid>`, random per instance: this store's rows live in this process only. */
  identity(): Promise<string> {
    return Promise.resolve(this.#identity);
  }

  /** Effects committed so far, in commit order. */
  get effects(): readonly InMemoryEffect[] {
    return this.#effects;
  }

  /** Committed effects of one message (or of all messages of `consumer`). */
  countEffects(consumer?: string, messageId?: string): number {
    return this.#effects.filter(
      (e) => (consumer === undefined || e.consumer === consumer) && (messageId === undefined || e.messageId === messageId),
    ).length;
  }

  /**
   * Simulates an outage: while false, every operation rejects with an error, as a Postgres store would with
   * the database down. Default is true.
   */
  setAvailable(available: boolean): void {
    this.#available = available;
  }

  // ── message path ────────────────────────────────────────────────────────────────────────────────────────

  async runTransactional<T>(
    settings: ClaimSettings,
    request: ClaimRequest,
    work: (tx: InMemoryTransaction, claimed: ClaimedDelivery) => Promise<T>,
  ): Promise<TransactionalRun<T>> {
    this.#check();
    const key = keyOf(settings.consumer, request.messageId);
    const release = await this.#locks.acquire(key, settings.lockTimeoutMs);
    if (release === undefined) return { kind: 'busy', reason: 'lock-timeout' };
    try {
      const decision = this.#decide(settings, request, 'completed', null, undefined);
      if (decision.kind === 'not-claimed') return { kind: 'not-claimed', row: this.#state(key) };
      if (decision.kind === 'exhausted') {
        this.#rows.set(key, decision.next);
        return { kind: 'exhausted', row: this.#state(key)! };
      }
      const sink = newSink(settings.consumer, request.messageId);
      let value: T;
      try {
        value = await work(new InMemoryTransaction(() => sink), decision.claimed);
      } catch (error) {
        sink.closed = true;
        return { kind: 'failed', claimed: decision.claimed, error };
      }
      this.#check();
      this.#rows.set(key, decision.next);
      this.#commit(sink);
      return { kind: 'completed', claimed: decision.claimed, value };
    } finally {
      release();
    }
  }

  async runTransactionalBatch(
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: (tx: InMemoryTransaction, claimed: ClaimedDelivery, index: number) => Promise<void>,
    onFailure: (claimed: ClaimedDelivery, error: unknown, index: number) => FailureRecord,
  ): Promise<BatchRun[]> {
    this.#check();
    const order = requests.map((r, i) => ({ key: keyOf(settings.consumer, r.messageId), i })).sort((a, b) => cmp(a.key, b.key));
    const releases: (() => void)[] = [];
    try {
      for (const { key } of order) {
        const release = await this.#locks.acquire(key, settings.lockTimeoutMs);
        if (release === undefined) return requests.map(() => ({ kind: 'busy', reason: 'lock-timeout' }) as const);
        releases.push(release);
      }
      const staged = new Map<string, Row>();
      const sinks: TransactionSink[] = [];
      const results: BatchRun[] = [];
      for (let i = 0; i < requests.length; i++) {
        const request = requests[i]!;
        const key = keyOf(settings.consumer, request.messageId);
        const decision = this.#decide(settings, request, 'completed', null, undefined);
        if (decision.kind === 'not-claimed') {
          results.push({ kind: 'not-claimed', row: this.#state(key) });
          continue;
        }
        if (decision.kind === 'exhausted') {
          staged.set(key, decision.next);
          results.push({ kind: 'exhausted', row: withWaits(decision.next, this.#clock()) });
          continue;
        }
        const sink = newSink(settings.consumer, request.messageId);
        try {
          await work(new InMemoryTransaction(() => sink), decision.claimed, i);
          staged.set(key, decision.next);
          sinks.push(sink);
          results.push({ kind: 'completed', claimed: decision.claimed });
        } catch (error) {
          sink.closed = true;
          const record = onFailure(decision.claimed, error, i);
          const failed = this.#failed(settings, decision.next, record);
          staged.set(key, failed);
          results.push({ kind: 'failed', claimed: decision.claimed, error, write: { recorded: true, row: freeze(failed) } });
        }
      }
      this.#check();
      for (const [key, row] of staged) this.#rows.set(key, row);
      for (const sink of sinks) this.#commit(sink);
      return results;
    } finally {
      for (const release of releases) release();
    }
  }

  async claimLease(settings: ClaimSettings & { readonly leaseMs: number }, request: ClaimRequest): Promise<LeaseClaim> {
    this.#check();
    const key = keyOf(settings.consumer, request.messageId);
    const release = await this.#locks.acquire(key, settings.lockTimeoutMs);
    if (release === undefined) return { kind: 'busy', reason: 'lock-timeout' };
    try {
      const decision = this.#decide(settings, request, 'processing', randomUUID(), settings.leaseMs);
      if (decision.kind === 'not-claimed') return { kind: 'not-claimed', row: this.#state(key) };
      this.#rows.set(key, decision.next);
      if (decision.kind === 'exhausted') return { kind: 'exhausted', row: this.#state(key)! };
      return { kind: 'claimed', claimed: decision.claimed };
    } finally {
      release();
    }
  }

  async completeLease<T>(
    settings: ClaimSettings,
    claimed: ClaimedDelivery,
    work: (tx: InMemoryTransaction) => Promise<T>,
  ): Promise<LeaseRun<T>> {
    this.#check();
    const sink = newSink(settings.consumer, claimed.messageId);
    let value: T;
    try {
      value = await work(new InMemoryTransaction(() => sink));
    } catch (error) {
      sink.closed = true;
      return { kind: 'failed', error };
    }
    const key = keyOf(settings.consumer, claimed.messageId);
    const release = (await this.#locks.acquire(key))!;
    try {
      this.#check();
      const row = this.#rows.get(key);
      if (row === undefined || row.status !== 'processing' || row.leaseToken !== claimed.leaseToken) {
        sink.closed = true;
        return { kind: 'lease-lost' };
      }
      const now = this.#clock();
      this.#rows.set(key, {
        ...row,
        status: 'completed',
        completedAt: new Date(now),
        expiresAt: new Date(now + settings.dedupeWindowMs),
        leaseToken: null,
        lockedUntil: null,
      });
      this.#commit(sink);
      return { kind: 'completed', value };
    } finally {
      release();
    }
  }

  async recordFailure(settings: ClaimSettings, failure: FailureRecord): Promise<FailureWrite> {
    this.#check();
    const key = keyOf(settings.consumer, failure.messageId);
    const release = (await this.#locks.acquire(key))!;
    try {
      const row = this.#rows.get(key);
      const now = this.#clock();
      if (failure.leaseToken !== null) {
        if (row === undefined || row.status !== 'processing' || row.leaseToken !== failure.leaseToken) {
          return { recorded: false, row: row === undefined ? undefined : freeze(row) };
        }
      } else if (
        row !== undefined &&
        (!(
          row.status === 'failed' ||
          row.status === 'processing' ||
          (row.status === 'dead_lettered' && failure.reopenedBy !== undefined && row.lastReplayId !== failure.reopenedBy)
        ) ||
          (row.fingerprint !== null && row.fingerprint !== failure.fingerprint))
      ) {
        return { recorded: false, row: freeze(row) };
      }
      const base: Row = row ?? {
        ...emptyRow(settings.consumer, failure.messageId, now, settings.dedupeWindowMs),
        attempts: failure.attempt,
        startedAttempts: failure.attempt,
        lastReplayId: failure.reopenedBy ?? null,
        claimedFrom: 'new',
      };
      // A transactional attempt that reopened a dead letter: its claim rolled back, so reapply the reopening.
      const reopen = failure.leaseToken === null && failure.reopenedBy !== undefined && base.status === 'dead_lettered';
      const next = this.#failed(
        settings,
        {
          ...base,
          attempts: reopen ? failure.attempt : Math.max(base.attempts, failure.attempt),
          firstFailureAt: reopen ? null : base.firstFailureAt,
        },
        failure,
      );
      next.startedAttempts = reopen ? failure.attempt : Math.max(base.startedAttempts, failure.attempt);
      if (reopen) {
        next.attempts = failure.attempt;
        next.replayCount = base.replayCount + 1;
        next.lastReplayId = failure.reopenedBy ?? null;
        next.claimedFrom = 'dead_lettered';
      }
      next.fingerprint = base.fingerprint ?? failure.fingerprint;
      next.messageTimestamp = base.messageTimestamp ?? failure.messageTimestamp ?? null;
      this.#rows.set(key, next);
      return { recorded: true, row: freeze(next) };
    } finally {
      release();
    }
  }

  async recordAttemptsStarted(settings: ClaimSettings, messageIds: readonly string[]): Promise<void> {
    this.#check();
    const now = this.#clock();
    for (const id of new Set(messageIds)) {
      const key = keyOf(settings.consumer, id);
      const row = this.#rows.get(key);
      if (row === undefined) {
        this.#rows.set(key, { ...emptyRow(settings.consumer, id, now, settings.dedupeWindowMs), startedAttempts: 1 });
      } else if (
        (row.status === 'failed' && row.availableAt.getTime() <= now) ||
        (row.status === 'processing' && (row.lockedUntil === null || row.lockedUntil.getTime() <= now))
      ) {
        row.startedAttempts = Math.max(row.startedAttempts, row.attempts) + 1;
      }
    }
  }

  async recordReplay(entry: ReplayAuditEntry): Promise<void> {
    this.#check();
    this.#replays.push(Object.freeze({ ...entry, at: new Date(this.#clock()) }));
  }

  async amendDeadLetter(amendment: PayloadAmendment): Promise<AmendmentResult> {
    this.#check();
    const key = keyOf(amendment.consumer, amendment.messageId);
    const release = await this.#locks.acquire(key, OPERATOR_LOCK_TIMEOUT_MS);
    if (release === undefined) throw new StoreUnavailableError('the row is locked by a delivery in progress; try again');
    try {
      const row = this.#rows.get(key);
      if (row === undefined) return { kind: 'no-row' };
      if (row.status !== 'dead_lettered') return { kind: 'not-dead-lettered', row: freeze(row) };
      if (row.fingerprint !== amendment.fromFingerprint) return { kind: 'fingerprint-changed', row: freeze(row) };
      row.fingerprint = amendment.toFingerprint;
      this.#replays.push(
        Object.freeze({
          replayId: amendment.replayId,
          consumer: amendment.consumer,
          messageId: amendment.messageId,
          requestedBy: amendment.requestedBy,
          requestedAt: new Date(this.#clock()),
          outcome: amendmentOutcome(amendment.fromFingerprint, amendment.toFingerprint, amendment.reason),
          at: new Date(this.#clock()),
        }),
      );
      return { kind: 'amended', row: freeze(row) };
    } finally {
      release();
    }
  }

  async forgetCompleted(request: ForgetRequest): Promise<ForgetResult> {
    this.#check();
    const key = keyOf(request.consumer, request.messageId);
    const release = await this.#locks.acquire(key, OPERATOR_LOCK_TIMEOUT_MS);
    if (release === undefined) throw new StoreUnavailableError('the row is locked by a delivery in progress; try again');
    try {
      const row = this.#rows.get(key);
      if (row === undefined) return { kind: 'no-row' };
      if (row.status !== 'completed') return { kind: 'not-completed', row: freeze(row) };
      this.#rows.delete(key);
      this.#replays.push(
        Object.freeze({
          replayId: request.actionId,
          consumer: request.consumer,
          messageId: request.messageId,
          requestedBy: request.requestedBy,
          requestedAt: new Date(this.#clock()),
          outcome: forgetOutcome(row.fingerprint, request.reason),
          at: new Date(this.#clock()),
        }),
      );
      return { kind: 'forgotten', row: freeze(row) };
    } finally {
      release();
    }
  }

  /** The store's clock (the `clock` option). */
  async now(): Promise<Date> {
    this.#check();
    return new Date(this.#clock());
  }

  async prune(options: PruneOptions = {}): Promise<PruneResult> {
    this.#check();
    if (this.#pruning) return { status: 'locked', deleted: 0, batches: 0 };
    this.#pruning = true;
    try {
      const batchSize = options.batchSize ?? 5_000;
      const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
      const now = this.#clock();
      const expired = [...this.#rows.entries()].filter(
        ([key, r]) =>
          r.status === 'completed' &&
          r.expiresAt.getTime() < now &&
          (options.consumer === undefined || r.consumer === options.consumer) &&
          !this.#locks.isHeld(key),
      );
      if (options.dryRun === true) return { status: 'dry-run', deleted: expired.length, batches: 0 };
      let deleted = 0;
      let batches = 0;
      while (batches < maxBatches) {
        const batch = expired.slice(deleted, deleted + batchSize);
        for (const [key] of batch) this.#rows.delete(key);
        deleted += batch.length;
        batches++;
        // Let a concurrent runner observe the lock, as it would between Postgres batches.
        await Promise.resolve();
        if (batch.length < batchSize) break;
      }
      return { status: 'pruned', deleted, batches };
    } finally {
      this.#pruning = false;
    }
  }

  // ── inspection ──────────────────────────────────────────────────────────────────────────────────────────

  async findRows(consumer: string, messageIds: readonly string[]): Promise<InboxRow[]> {
    this.#check();
    return [...new Set(messageIds)].flatMap((id) => {
      const row = this.#rows.get(keyOf(consumer, id));
      return row === undefined ? [] : [freeze(row)];
    });
  }

  async countByStatus(filter: { readonly consumer?: string } = {}): Promise<StatusCount[]> {
    this.#check();
    const counts = new Map<string, number>();
    for (const r of this.#rows.values()) {
      if (filter.consumer !== undefined && r.consumer !== filter.consumer) continue;
      const k = `${r.consumer}\u0000${r.status}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    return [...counts.entries()]
      .map(([k, count]) => {
        const [consumer, status] = k.split('\u0000') as [string, InboxStatus];
        return { consumer, status, count };
      })
      .sort((a, b) => cmp(a.consumer, b.consumer) || cmp(a.status, b.status));
  }

  async countDeadLettersByReason(filter: { readonly consumer?: string } = {}): Promise<ReasonCount[]> {
    this.#check();
    const counts = new Map<string, number>();
    for (const r of this.#rows.values()) {
      if (r.status !== 'dead_lettered' || (filter.consumer !== undefined && r.consumer !== filter.consumer)) continue;
      const k = `${r.consumer}\u0000${r.deadLetterReason ?? 'unknown'}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    return [...counts.entries()]
      .map(([k, count]) => {
        const [consumer, reason] = k.split('\u0000') as [string, string];
        return { consumer, reason, count };
      })
      .sort((a, b) => cmp(a.consumer, b.consumer) || b.count - a.count || cmp(a.reason, b.reason));
  }

  async listDeadLetters(
    filter: InspectionFilter & { readonly reason?: string; readonly since?: Date; readonly until?: Date } = {},
  ): Promise<InboxRow[]> {
    this.#check();
    return [...this.#rows.values()]
      .filter(
        (r) =>
          r.status === 'dead_lettered' &&
          (filter.consumer === undefined || r.consumer === filter.consumer) &&
          (filter.reason === undefined || r.deadLetterReason === filter.reason) &&
          (filter.since === undefined || (r.deadLetteredAt !== null && r.deadLetteredAt >= filter.since)) &&
          (filter.until === undefined || (r.deadLetteredAt !== null && r.deadLetteredAt < filter.until)),
      )
      .sort(
        (a, b) =>
          (b.deadLetteredAt?.getTime() ?? 0) - (a.deadLetteredAt?.getTime() ?? 0) ||
          cmp(a.consumer, b.consumer) ||
          cmp(a.messageId, b.messageId),
      )
      .slice(0, limitOf(filter))
      .map(freeze);
  }

  async listProcessing(filter: InspectionFilter = {}): Promise<ProcessingRow[]> {
    this.#check();
    const now = this.#clock();
    return [...this.#rows.values()]
      .filter((r) => r.status === 'processing' && (filter.consumer === undefined || r.consumer === filter.consumer))
      .sort((a, b) => a.receivedAt.getTime() - b.receivedAt.getTime() || cmp(a.consumer, b.consumer) || cmp(a.messageId, b.messageId))
      .slice(0, limitOf(filter))
      .map((r) => ({
        ...freeze(r),
        lease: r.leaseToken === null ? 'none' : r.lockedUntil !== null && r.lockedUntil.getTime() > now ? 'live' : 'expired',
        ageMs: Math.max(0, now - r.receivedAt.getTime()),
      }));
  }

  async countExpiringSoon(filter: { readonly withinMs: number; readonly consumer?: string }): Promise<{ consumer: string; count: number }[]> {
    this.#check();
    const horizon = this.#clock() + filter.withinMs;
    const counts = new Map<string, number>();
    for (const r of this.#rows.values()) {
      if (r.status !== 'completed' || r.expiresAt.getTime() >= horizon) continue;
      if (filter.consumer !== undefined && r.consumer !== filter.consumer) continue;
      counts.set(r.consumer, (counts.get(r.consumer) ?? 0) + 1);
    }
    return [...counts.entries()].map(([consumer, count]) => ({ consumer, count })).sort((a, b) => cmp(a.consumer, b.consumer));
  }

  async listReplays(
    filter: InspectionFilter & { readonly messageId?: string; readonly replayId?: string } = {},
  ): Promise<ReplayAuditRow[]> {
    this.#check();
    return this.#replays
      .filter(
        (r) =>
          (filter.consumer === undefined || r.consumer === filter.consumer) &&
          (filter.messageId === undefined || r.messageId === filter.messageId) &&
          (filter.replayId === undefined || r.replayId === filter.replayId),
      )
      .reverse()
      .slice(0, limitOf(filter));
  }

  // ── the state machine (mirrors InboxStatements.claim) ───────────────────────────────────────────────────

  #decide(
    settings: ClaimSettings,
    request: ClaimRequest,
    target: 'completed' | 'processing',
    leaseToken: string | null,
    leaseMs: number | undefined,
  ): Decision {
    const now = this.#clock();
    const key = keyOf(settings.consumer, request.messageId);
    const row = this.#rows.get(key);
    const lockedUntil = leaseMs === undefined ? null : new Date(now + leaseMs);
    const deliveries = Math.max(1, request.deliveryCount);
    if (row === undefined) {
      const fresh: Row = {
        ...emptyRow(settings.consumer, request.messageId, now, settings.dedupeWindowMs),
        fingerprint: request.fingerprint,
        messageTimestamp: request.messageTimestamp ?? null,
        lastReplayId: request.replayId ?? null,
        startedAttempts: deliveries,
        claimedFrom: 'new',
      };
      if (deliveries > settings.maxAttempts) return { kind: 'exhausted', next: exhaust(fresh, deliveries, now) };
      const next: Row = {
        ...fresh,
        status: target,
        attempts: deliveries,
        leaseToken,
        lockedUntil,
        completedAt: target === 'completed' ? new Date(now) : null,
      };
      return { kind: 'claim', next, claimed: { messageId: request.messageId, attempt: deliveries, from: 'new', leaseToken } };
    }
    if (!claimable(row, request.fingerprint, request.replayId ?? null, now)) return { kind: 'not-claimed' };
    const reopen = row.status === 'dead_lettered';
    const attempt = reopen ? deliveries : Math.max(row.attempts + 1, row.startedAttempts, deliveries);
    // claimable() admitted only failed, processing and dead_lettered rows.
    const from: ClaimedFrom =
      row.status === 'processing' && row.leaseToken !== null ? 'lease-expired' : (row.status as Exclude<InboxStatus, 'completed' | 'discarded' | 'archived'>);
    const base: Row = {
      ...row,
      fingerprint: request.fingerprint,
      startedAttempts: attempt,
      availableAt: new Date(now),
      messageTimestamp: row.messageTimestamp ?? request.messageTimestamp ?? null,
      expiresAt: new Date(now + settings.dedupeWindowMs),
      replayCount: row.replayCount + (reopen ? 1 : 0),
      lastReplayId: reopen ? (request.replayId ?? null) : row.lastReplayId,
      firstFailureAt: reopen ? null : row.firstFailureAt,
      lastFailureAt: reopen ? null : row.lastFailureAt,
      claimedFrom: from,
    };
    if (attempt > settings.maxAttempts) return { kind: 'exhausted', next: exhaust(base, attempt, now) };
    const next: Row = {
      ...base,
      status: target,
      attempts: attempt,
      leaseToken,
      lockedUntil,
      completedAt: target === 'completed' ? new Date(now) : null,
      deadLetterReason: null,
      deadLetteredAt: null,
    };
    return { kind: 'claim', next, claimed: { messageId: request.messageId, attempt, from, leaseToken } };
  }

  /** `row` after a failed attempt: `failed` with a retry time, or `dead_lettered`. */
  #failed(_settings: ClaimSettings, row: Row, failure: FailureRecord): Row {
    const now = this.#clock();
    const dead = failure.deadLetterReason !== undefined;
    return {
      ...row,
      status: dead ? 'dead_lettered' : 'failed',
      attempts: failure.attempt > row.attempts ? failure.attempt : row.attempts,
      availableAt: new Date(dead ? now : now + Math.max(0, Math.round(failure.retryDelayMs))),
      lastError: failure.error,
      deadLetterReason: failure.deadLetterReason ?? null,
      deadLetteredAt: dead ? new Date(now) : null,
      firstFailureAt: row.firstFailureAt ?? new Date(now),
      lastFailureAt: new Date(now),
      completedAt: null,
      leaseToken: null,
      lockedUntil: null,
    };
  }

  #state(key: string): InboxRowState | undefined {
    const row = this.#rows.get(key);
    return row === undefined ? undefined : withWaits(row, this.#clock());
  }

  #commit(sink: TransactionSink): void {
    sink.closed = true;
    for (const effect of sink.effects) this.#effects.push({ consumer: sink.consumer, messageId: sink.messageId, effect });
    for (const fn of sink.onCommit) fn();
  }

  #check(): void {
    if (!this.#available) throw Object.assign(new Error('connect ECONNREFUSED (in-memory store set unavailable)'), { code: 'ECONNREFUSED' });
  }
}

function keyOf(consumer: string, messageId: string): string {
  return `${consumer}\u0000${messageId}`;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function limitOf(filter: InspectionFilter): number {
  const limit = filter.limit ?? DEFAULT_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  return limit;
}

function newSink(consumer: string, messageId: string): TransactionSink {
  return { consumer, messageId, effects: [], onCommit: [], closed: false };
}

function claimable(row: Row, fingerprint: string, replayId: string | null, now: number): boolean {
  if (row.fingerprint !== null && row.fingerprint !== fingerprint) return false;
  switch (row.status) {
    case 'failed':
      return row.availableAt.getTime() <= now;
    case 'processing':
      return row.lockedUntil === null || row.lockedUntil.getTime() <= now;
    case 'dead_lettered':
      return replayId !== null && replayId !== row.lastReplayId;
    case 'completed':
    case 'discarded':
    case 'archived':
      return false;
  }
}

function exhaust(row: Row, attempt: number, now: number): Row {
  return {
    ...row,
    status: 'dead_lettered',
    attempts: attempt - 1,
    startedAttempts: attempt,
    leaseToken: null,
    lockedUntil: null,
    completedAt: null,
    deadLetterReason: 'max-attempts',
    deadLetteredAt: new Date(now),
  };
}

function emptyRow(consumer: string, messageId: string, now: number, windowMs: number): Row {
  return {
    consumer,
    messageId,
    status: 'processing',
    fingerprint: null,
    attempts: 0,
    startedAttempts: 0,
    leaseToken: null,
    lockedUntil: null,
    availableAt: new Date(now),
    receivedAt: new Date(now),
    messageTimestamp: null,
    completedAt: null,
    expiresAt: new Date(now + windowMs),
    lastError: null,
    deadLetterReason: null,
    deadLetteredAt: null,
    replayCount: 0,
    lastReplayId: null,
    firstFailureAt: null,
    lastFailureAt: null,
    claimedFrom: null,
  };
}

function freeze(row: Row): InboxRow {
  return Object.freeze({ ...row });
}

function withWaits(row: Row, now: number): InboxRowState {
  return Object.freeze({
    ...row,
    availableInMs: Math.max(0, row.availableAt.getTime() - now),
    leaseRemainingMs: row.lockedUntil === null ? 0 : Math.max(0, row.lockedUntil.getTime() - now),
  });
}
