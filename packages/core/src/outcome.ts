// Outcomes are what core returns to a transport. Core never acks: the transport maps each outcome to the
// broker's action (commit, ack, delete, delay, publish to the DLQ).

/** Name, message, code and the head of the stack of an error, as stored in the inbox and DLQ headers. */
export interface ErrorInfo {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
  /** The first lines of the stack (at most 10). */
  readonly stack?: string;
}

/** Why a message was dead-lettered. Transports may add their own reasons (for example `oversize`). */
export type DeadLetterReason =
  | 'max-attempts'
  | 'permanent-error'
  | 'undecodable'
  | 'schema-invalid'
  | 'payload-mismatch'
  | 'missing-id'
  | 'invalid-id'
  | 'beyond-dedupe-window'
  /** The inbox refused, for its content, to record the message (its claim, or even a minimal failure record). */
  | 'unrecordable'
  /** A retry whose delayed copy the broker can never take (RabbitMQ: headers over 64 KiB with the retry headers). */
  | 'retry-copy-too-large'
  /** The handler ended, or tried to end, its transaction (`context.tx`): see `TransactionControlError`. */
  | 'transaction-control'
  /** The consumer's `fingerprint` function threw, or answered what cannot be fingerprinted: see `FingerprintError`. */
  | 'fingerprint-failed'
  | (string & {});

/**
 * Why a message is to be retried. `contended`: the claim lost a race with a concurrent delivery of the same id
 * (for example a serialization failure) and could not decide; the redelivery will.
 */
export type RetryReason = 'handler-error' | 'lock-timeout' | 'lease-held' | 'store-unavailable' | 'lease-lost' | 'contended';

/**
 * Why a delivery was suppressed as a duplicate: its id `completed` (or a replay of it did), or it is a dead
 * letter an operator `discarded` or `archived` (retired dead letters are never run again; see docs/operations.md).
 */
export type DuplicateReason = 'completed' | 'replay-of-completed' | 'discarded' | 'archived';

/** The message's effect committed in this delivery: ack / commit / delete it. */
export interface ProcessedOutcome {
  readonly status: 'processed';
  readonly messageId: string;
  /** The attempt that succeeded, 1-based. */
  readonly attempt: number;
  readonly durationMs: number;
}

/** The message was applied before: ack / commit / delete it without doing anything. */
export interface DuplicateOutcome {
  readonly status: 'duplicate';
  readonly messageId: string;
  readonly reason: DuplicateReason;
  /**
   * `fast-path` when the consumer's `fastPath` (a Redis cache in front of the inbox) answered without touching
   * Postgres; absent when the inbox did.
   */
  readonly source?: 'fast-path';
}

/** Not done yet: redeliver after `delayMs` (0 = as soon as possible). Never ack as done. */
export interface RetryOutcome {
  readonly status: 'retry';
  readonly messageId: string;
  readonly delayMs: number;
  /** The attempt that just failed (0 when the handler did not run, e.g. a lock timeout). */
  readonly attempt: number;
  readonly reason: RetryReason;
  readonly error?: ErrorInfo;
}

/**
 * Give up: publish the message to the dead-letter queue with these facts, and only then ack it. If the
 * publish fails, do not ack: a redelivery of a dead-lettered message yields this outcome again.
 */
export interface DeadLetterOutcome {
  readonly status: 'dead-letter';
  /** `undefined` only for reason `missing-id`. */
  readonly messageId: string | undefined;
  readonly reason: DeadLetterReason;
  /** Attempts made (0 when the message was rejected before the handler ran). */
  readonly attempts: number;
  readonly error?: ErrorInfo;
  readonly firstFailureAt?: Date;
  readonly lastFailureAt?: Date;
}

/** What `IdempotentConsumer.handle()` resolves to. It never rejects for a message's fault. */
export type Outcome = ProcessedOutcome | DuplicateOutcome | RetryOutcome | DeadLetterOutcome;

/** Every outcome status, for exhaustive switches and metrics labels. */
export const OUTCOME_STATUSES = ['processed', 'duplicate', 'retry', 'dead-letter'] as const;
export type OutcomeStatus = Outcome['status'];
