// The inbox store port: the few atomic operations idempotentConsumer() needs, and the read-only inspection API
// the CLI and the testing kit build on. PostgresInboxStore (Kysely over pg or PGlite) and InMemoryInboxStore
// implement it; both pass the store conformance suite in @inboxkit/testing. The state machine is DESIGN §3:
//
//   (none) ─claim─► processing ─commit─► completed ─expires_at─► pruned
//                      │  ▲
//                      ▼  │ available_at passed / lease expired
//                    failed ─(attempts ≥ max or permanent)─► dead_lettered ─replay─► processing
//
// In transactional mode the claim row is written `completed` directly: the commit is the completion.

import type { ErrorInfo } from './outcome.js';

/**
 * The state of an inbox row. `discarded` and `archived` are dead letters an operator retired (`discardDeadLetters`,
 * `archiveDeadLetters` of the Postgres store): they leave the live views, keep deduplicating their id until the
 * pruner's retention removes them, and are never claimed again.
 */
export type InboxStatus = 'processing' | 'failed' | 'completed' | 'dead_lettered' | 'discarded' | 'archived';

/** Every status, for exhaustive reports. */
export const INBOX_STATUSES = ['processing', 'failed', 'completed', 'dead_lettered', 'discarded', 'archived'] as const;

/**
 * What a row was when a delivery claimed it: `new` (no row), `failed` (a retry), `processing` (an attempt was
 * recorded as started but never finished, see `recordAttemptsStarted`), `lease-expired` (leased mode takeover)
 * or `dead_lettered` (an explicit replay).
 */
export type ClaimedFrom = 'new' | 'failed' | 'processing' | 'lease-expired' | 'dead_lettered';

/** One inbox row. Nullable columns are `null` when unset. */
export interface InboxRow {
  readonly consumer: string;
  readonly messageId: string;
  readonly status: InboxStatus;
  /** SHA-256 (hex) of the canonical payload; `null` for a row created by `recordAttemptsStarted`. */
  readonly fingerprint: string | null;
  /** Attempts made (the one running included). Reset by a replay. */
  readonly attempts: number;
  /** Attempts recorded as started by `recordAttemptsStarted`; a claim counts `max(attempts + 1, this)`. */
  readonly startedAttempts: number;
  readonly leaseToken: string | null;
  readonly lockedUntil: Date | null;
  /** No retry before this time. */
  readonly availableAt: Date;
  /** First receipt. */
  readonly receivedAt: Date;
  readonly messageTimestamp: Date | null;
  readonly completedAt: Date | null;
  /** A `completed` row may be pruned after this time; other states are never pruned by age. */
  readonly expiresAt: Date;
  readonly lastError: ErrorInfo | null;
  readonly deadLetterReason: string | null;
  readonly deadLetteredAt: Date | null;
  readonly replayCount: number;
  readonly lastReplayId: string | null;
  readonly firstFailureAt: Date | null;
  readonly lastFailureAt: Date | null;
  readonly claimedFrom: ClaimedFrom | null;
}

/** A row as a claim saw it, with the waits still to go measured on the store's clock. */
export interface InboxRowState extends InboxRow {
  /** Milliseconds until `availableAt` (0 when passed). */
  readonly availableInMs: number;
  /** Milliseconds until `lockedUntil` (0 when passed or unset). */
  readonly leaseRemainingMs: number;
}

/** Per-consumer settings every claim carries. */
export interface ClaimSettings {
  readonly consumer: string;
  /** An attempt numbered above this is not run: the row is dead-lettered with reason `max-attempts`. */
  readonly maxAttempts: number;
  /** A completed row is remembered this long after completion. */
  readonly dedupeWindowMs: number;
  /** How long a claim waits for a concurrent delivery of the same id before giving up. */
  readonly lockTimeoutMs: number;
}

/** One delivery to claim. */
export interface ClaimRequest {
  readonly messageId: string;
  readonly fingerprint: string;
  readonly messageTimestamp: Date | undefined;
  /**
   * The intent's own time, when the message carries one (CloudEvents `time`, the consumer's `dayOf`): a store
   * partitioned by day takes the day from it, else from `messageTimestamp`. Other stores ignore it.
   */
  readonly intentTime?: Date;
  /** The broker's count of deliveries, this one included; 0 when the broker keeps none. */
  readonly deliveryCount: number;
  /** Set when the delivery is an explicit DLQ replay: a `dead_lettered` row is reopened once per replay id. */
  readonly replayId: string | undefined;
}

/** A delivery the store handed to this worker. */
export interface ClaimedDelivery {
  readonly messageId: string;
  /** This attempt's number, 1-based: max(attempts + 1, started attempts, delivery count), 1 after a replay. */
  readonly attempt: number;
  readonly from: ClaimedFrom;
  /** The fencing token of the lease (leased mode); `null` in transactional mode. */
  readonly leaseToken: string | null;
}

/** Why a claim could not decide now; the delivery is retried. */
export type BusyReason = 'lock-timeout' | 'contended';

/** The result of a claim that did not hand the delivery to this worker. */
export type UnclaimedResult =
  /** The attempt would exceed `maxAttempts`: the claim dead-lettered the row (reason `max-attempts`). */
  | { readonly kind: 'exhausted'; readonly row: InboxRowState }
  /** The row exists and is not claimable (completed, dead-lettered, waiting, leased, or another payload). */
  | { readonly kind: 'not-claimed'; readonly row: InboxRowState | undefined }
  /**
   * The row is completed, recorded with this delivery's payload (or with none): a plain duplicate. A store may
   * answer this instead of `not-claimed` with the row, and save reading and sending the row — the hot path of
   * redeliveries. The Postgres store does on its lean claims; the in-memory store answers `not-claimed`.
   */
  | { readonly kind: 'duplicate' }
  /** A concurrent delivery held the row longer than the lock timeout, or the claim lost a race. */
  | { readonly kind: 'busy'; readonly reason: BusyReason };

/**
 * What `work` does, as SQL, when the handler is a statement handler (`statementHandler`): a store may build
 * these statements (before the claim or after it) and run them in the claim's transaction instead of calling
 * `work` — with the claim, or with the COMMIT — with the same result (`value` is then `undefined`), as long
 * as they run only when the delivery was claimed. `statements` may throw (the builder did); the store then
 * calls `work`, which throws the same. A store that does not use them calls `work`.
 */
export interface ClaimEffect {
  readonly statements: () => readonly { readonly sql: string; readonly parameters: readonly unknown[] }[];
}

/** The result of `runTransactional`. */
export type TransactionalRun<T> =
  /** `work` resolved and its effects committed with the `completed` row. */
  | { readonly kind: 'completed'; readonly claimed: ClaimedDelivery; readonly value: T }
  /** `work` threw (or the commit was refused): everything rolled back; record the failure with `recordFailure`. */
  | { readonly kind: 'failed'; readonly claimed: ClaimedDelivery; readonly error: unknown }
  | UnclaimedResult;

/** What to record about a failed attempt, in its own short transaction. */
export interface FailureRecord {
  readonly messageId: string;
  /** `null` when the payload could not be decoded (the row then keeps whatever fingerprint it had). */
  readonly fingerprint: string | null;
  readonly messageTimestamp: Date | undefined;
  /** As `ClaimRequest.intentTime`: the day of a store partitioned by day, when set. */
  readonly intentTime?: Date;
  readonly attempt: number;
  readonly error: ErrorInfo;
  /** Dead-letter the row with this reason instead of scheduling a retry. */
  readonly deadLetterReason: string | undefined;
  /** No retry before now + this. Ignored when dead-lettering. */
  readonly retryDelayMs: number;
  /** Leased mode: record only while this lease is held. `null` in transactional mode. */
  readonly leaseToken: string | null;
  /**
   * Transactional mode: the replay id when this attempt had reopened a dead-lettered row. Its claim rolled back
   * with the handler's transaction, so the reopening (attempts restarted, replay counted) is recorded here.
   */
  readonly reopenedBy: string | undefined;
}

/** The result of `recordFailure`. */
export type FailureWrite =
  | { readonly recorded: true; readonly row: InboxRow }
  /** Not recorded: the row completed or was dead-lettered meanwhile, or the lease was lost. */
  | { readonly recorded: false; readonly row: InboxRow | undefined };

/** A failure inside a batch: what `onFailure` returns is recorded in the batch's own transaction. */
export type BatchRun =
  | { readonly kind: 'completed'; readonly claimed: ClaimedDelivery }
  | { readonly kind: 'failed'; readonly claimed: ClaimedDelivery; readonly error: unknown; readonly write: FailureWrite }
  | UnclaimedResult;

/** Leased mode: the result of `claimLease`. */
export type LeaseClaim = { readonly kind: 'claimed'; readonly claimed: ClaimedDelivery } | UnclaimedResult;

/** Leased mode: the result of `completeLease`. */
export type LeaseRun<T> =
  | { readonly kind: 'completed'; readonly value: T }
  /** Another worker took the lease over: `work`'s transaction was rolled back. */
  | { readonly kind: 'lease-lost' }
  | { readonly kind: 'failed'; readonly error: unknown };

/** One line of the replay audit. */
export interface ReplayAuditEntry {
  readonly replayId: string;
  readonly consumer: string;
  readonly messageId: string;
  readonly requestedBy: string | undefined;
  readonly requestedAt: Date | undefined;
  /** `reopened`, `skipped-completed`, `skipped-replayed`, … followed by the delivery's outcome status. */
  readonly outcome: string;
}

/** A stored replay audit line. */
export interface ReplayAuditRow extends ReplayAuditEntry {
  readonly at: Date;
}

/** Rows per (consumer, status). */
export interface StatusCount {
  readonly consumer: string;
  readonly status: InboxStatus;
  readonly count: number;
}

/** Dead-lettered rows per (consumer, reason). */
export interface ReasonCount {
  readonly consumer: string;
  readonly reason: string;
  readonly count: number;
}

/** A `processing` row with its lease state. */
export interface ProcessingRow extends InboxRow {
  /** `live`: a worker holds an unexpired lease; `expired`: the next delivery takes over; `none`: no lease. */
  readonly lease: 'live' | 'expired' | 'none';
  /** Milliseconds since the row was first received. */
  readonly ageMs: number;
}

/** Filters of the inspection API. Every filter is optional; `limit` defaults to 100. */
export interface InspectionFilter {
  readonly consumer?: string;
  readonly limit?: number;
}

/** Options of `prune`. */
export interface PruneOptions {
  /** Only this consumer's rows. Default is every consumer. */
  readonly consumer?: string;
  /** Rows deleted per statement. Default is 5,000. */
  readonly batchSize?: number;
  /** Count what would be deleted; delete nothing. Default is false. */
  readonly dryRun?: boolean;
  /** Stop after this many batches (the rest waits for the next run). Default is unlimited. */
  readonly maxBatches?: number;
  /**
   * How long a dead letter an operator discarded or archived is kept (from the act) before `prune` deletes it
   * and its details; until then a redelivery of its id is a duplicate. The audit lines stay. Stores without
   * retired rows ignore it. Default is 30 days.
   */
  readonly retiredRetentionMs?: number;
}

/** The result of a prune run. */
export interface PruneResult {
  /** `locked`: another runner held the prune lock, nothing was done. */
  readonly status: 'pruned' | 'dry-run' | 'locked';
  /** Rows deleted (or, for a dry run, that would be deleted). */
  readonly deleted: number;
  readonly batches: number;
  /**
   * Of `deleted`, the discarded and archived dead letters past `retiredRetentionMs`; absent when none were
   * (and from stores without retired rows).
   */
  readonly retired?: number;
}

/**
 * Read-only views of the inbox for operators (the CLI's `status` and `dlq` commands) and tests. Never used on
 * the message path.
 */
export interface InboxInspector {
  /** The rows of these ids (missing ids are absent from the result). */
  findRows(consumer: string, messageIds: readonly string[]): Promise<InboxRow[]>;
  /** Row counts per consumer and status (zero counts omitted). */
  countByStatus(filter?: { readonly consumer?: string }): Promise<StatusCount[]>;
  /** Dead-lettered row counts per consumer and reason. */
  countDeadLettersByReason(filter?: { readonly consumer?: string }): Promise<ReasonCount[]>;
  /** Dead-lettered rows, most recent first, optionally of one reason and dead-lettered in [since, until). */
  listDeadLetters(
    filter?: InspectionFilter & { readonly reason?: string; readonly since?: Date; readonly until?: Date },
  ): Promise<InboxRow[]>;
  /** `processing` rows, oldest first, with their lease state: stuck work shows here. */
  listProcessing(filter?: InspectionFilter): Promise<ProcessingRow[]>;
  /** `completed` rows per consumer whose `expiresAt` falls within `withinMs` from now (already expired included). */
  countExpiringSoon(filter: { readonly withinMs: number; readonly consumer?: string }): Promise<{ consumer: string; count: number }[]>;
  /** Replay audit lines, most recent first. */
  listReplays(
    filter?: InspectionFilter & { readonly messageId?: string; readonly replayId?: string },
  ): Promise<ReplayAuditRow[]>;
}

/**
 * Edit and retry: the audited act that lets one dead-lettered message be replayed with a corrected payload under
 * its own id. Without it, a replay whose payload differs from the one recorded is dead-lettered as
 * `payload-mismatch`; with it, the row records the corrected payload's fingerprint, so the replay that carries
 * that payload reopens the row once (and any other payload, the old one included, is still a mismatch).
 */
export interface PayloadAmendment {
  readonly consumer: string;
  readonly messageId: string;
  /**
   * The fingerprint the operator saw on the row (`null`: none recorded): the amendment applies only while the
   * row still holds it, so two operators editing at once cannot overwrite each other unseen.
   */
  readonly fromFingerprint: string | null;
  /** `fingerprintJson`/`fingerprintPayload` of the corrected payload, as the consumer will compute it. */
  readonly toFingerprint: string;
  /** The replay id the corrected message will carry; the audit line is recorded under it. */
  readonly replayId: string;
  readonly requestedBy: string;
  /** Why, in the operator's words (required: an amendment is a deliberate act). */
  readonly reason: string;
}

/**
 * The result of `amendDeadLetter`: `amended` (the row now holds `toFingerprint`, audited), `not-dead-lettered`
 * (only a dead letter can be amended), `fingerprint-changed` (the row no longer holds `fromFingerprint`), or
 * `no-row`. Nothing is written unless `amended`.
 */
export type AmendmentResult =
  | { readonly kind: 'amended'; readonly row: InboxRow }
  | { readonly kind: 'not-dead-lettered'; readonly row: InboxRow }
  | { readonly kind: 'fingerprint-changed'; readonly row: InboxRow }
  | { readonly kind: 'no-row' };

/** Forget one id: delete its completed row on purpose, so the message can be processed again. */
export interface ForgetRequest {
  readonly consumer: string;
  readonly messageId: string;
  /** The id of the act, recorded as the audit line's replay id. */
  readonly actionId: string;
  readonly requestedBy: string;
  /** Why, in the operator's words (required: forgetting is a deliberate act). */
  readonly reason: string;
}

/**
 * The result of `forgetCompleted`: `forgotten` (the row, as it was, is deleted and the act audited),
 * `not-completed` (only a completed row is forgotten: a dead letter is replayed, work in flight is left alone),
 * or `no-row`. Nothing is written unless `forgotten`.
 */
export type ForgetResult =
  | { readonly kind: 'forgotten'; readonly row: InboxRow }
  | { readonly kind: 'not-completed'; readonly row: InboxRow }
  | { readonly kind: 'no-row' };

/**
 * An inbox store whose handler transactions have type `Tx`. Every method rejects with a
 * `StoreUnavailableError` when the store cannot be reached; the consumer turns that into `retry`.
 */
export interface InboxStore<Tx = unknown> extends InboxInspector {
  /** Human-readable kind, for logs (`postgres`, `memory`). */
  readonly kind: string;
  /** Phantom marker of the transaction type; never read at run time. */
  readonly __tx?: Tx;

  /**
   * Transactional mode: in one transaction, claims the delivery (one statement), runs `work` and commits the
   * row as `completed` with `work`'s effects. A concurrent claim of the same id waits at most
   * `settings.lockTimeoutMs`.
   */
  runTransactional<T>(
    settings: ClaimSettings,
    request: ClaimRequest,
    work: (tx: Tx, claimed: ClaimedDelivery) => Promise<T>,
    effect?: ClaimEffect,
  ): Promise<TransactionalRun<T>>;

  /**
   * Transactional mode for a batch of distinct ids: one transaction, one claim statement, each `work` inside
   * its own savepoint. A failed `work` rolls back to its savepoint and `onFailure`'s record is written in the
   * same transaction. Results are in `requests` order. A claim that times out makes every result `busy`.
   */
  runTransactionalBatch(
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: (tx: Tx, claimed: ClaimedDelivery, index: number) => Promise<void>,
    onFailure: (claimed: ClaimedDelivery, error: unknown, index: number) => FailureRecord,
    /** Per request, as for `runTransactional`: what `work` does as SQL, for statement handlers. */
    effects?: readonly (ClaimEffect | undefined)[],
  ): Promise<BatchRun[]>;

  /** Leased mode: claims and commits a lease of `leaseMs` with a fresh fencing token. */
  claimLease(settings: ClaimSettings & { readonly leaseMs: number }, request: ClaimRequest): Promise<LeaseClaim>;

  /**
   * Leased mode: runs `work` with a transaction that commits, with the row marked `completed`, only if
   * `claimed.leaseToken` still holds the lease. The transaction starts on `work`'s first query, so work that
   * calls other services first holds no connection meanwhile.
   */
  completeLease<T>(
    settings: ClaimSettings,
    claimed: ClaimedDelivery,
    work: (tx: Tx) => Promise<T>,
  ): Promise<LeaseRun<T>>;

  /**
   * Records a failed attempt in its own short transaction: `failed` with a retry time, or `dead_lettered`.
   * Never overwrites a row that completed or was dead-lettered meanwhile. Also records, with attempt 0, a
   * delivery dead-lettered before its claim (undecodable, schema-invalid, late), so the inbox lists it and an
   * explicit replay can reopen it.
   */
  recordFailure(settings: ClaimSettings, failure: FailureRecord): Promise<FailureWrite>;

  /**
   * Records, in one statement, that an attempt of each id is starting (creating `processing` rows without a
   * lease). Only rows a claim could take are counted, so a delivery that will be refused costs no attempt.
   * `messageTimestamps` (each id's message timestamp, in order) place the rows of a store partitioned by day.
   */
  recordAttemptsStarted(
    settings: ClaimSettings,
    messageIds: readonly string[],
    messageTimestamps?: readonly (Date | undefined)[],
  ): Promise<void>;

  /** Appends a line to the replay audit. */
  recordReplay(entry: ReplayAuditEntry): Promise<void>;

  /**
   * Edit and retry (operators only, never the message path): sets a dead-lettered row's fingerprint from
   * `fromFingerprint` to `toFingerprint` and appends the act to the replay audit (`amendmentOutcome`: who, when,
   * both fingerprints, the reason), atomically, waiting at most 5 s for a delivery holding the row (then a
   * `StoreUnavailableError`). State, attempts and replay bookkeeping are untouched: the replay that follows
   * reopens the row as any replay does, once. Optional for other stores; both of inboxkit's implement it.
   *
   * @example
   * const r = await store.amendDeadLetter({ consumer: 'orders', messageId: 'o-1', fromFingerprint: row.fingerprint,
   *   toFingerprint: fingerprintPayload(fixed), replayId, requestedBy: 'alice', reason: 'amount was negative' });
   */
  amendDeadLetter?(amendment: PayloadAmendment): Promise<AmendmentResult>;

  /**
   * Forget one id (operators only): deletes a `completed` row (and whatever else the store keeps of it) and
   * appends the act to the replay audit (`forgetOutcome`), atomically, waiting at most 5 s for a delivery
   * holding the row. Rows in any other state are left as they are. The next delivery of the id is processed as
   * new by the inbox; a fast path in front of it keeps its own entry until deleted (`inboxkit forget
   * --redis-url` does both). Optional for other stores; both of inboxkit's implement it.
   */
  forgetCompleted?(request: ForgetRequest): Promise<ForgetResult>;

  /**
   * The identity of the inbox this store answers for, which the fast path folds into its keys so that a cache
   * shared by two inboxes never answers one with the other's entries: the same for every process on the same
   * table, different for any other. The Postgres store: the cluster's system identifier, the database and the
   * schema-qualified table (read once per store); the in-memory store: random per instance. Optional: a
   * consumer whose store has none keeps fast-path entries of its own, under a random identity per process.
   *
   * @example
   * await new PostgresInboxStore({ db }).identity(); // 'postgres:7715534942652537953:app:"inboxkit"."inbox"'
   */
  identity?(): Promise<string>;

  /**
   * The store's clock: the one expiry, leases, retry times and pruning are measured on (Postgres `now()`). The
   * consumer's late-message rule asks it, so a skew between the application's clock and the database's does not
   * move the rule's threshold; it asks only for deliveries near or beyond the window, and every 10 minutes to
   * keep its estimate of the offset. Optional: without it the rule uses the application's clock.
   */
  now?(): Promise<Date>;

  /**
   * Deletes `completed` rows whose `expiresAt` passed, in batches, one runner at a time (a second concurrent
   * run returns `locked`). Rows in other states are never deleted.
   */
  prune(options?: PruneOptions): Promise<PruneResult>;
}
