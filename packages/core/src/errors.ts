// The error hierarchy every inboxkit package throws and classifies. One base class carries `code`,
// `retriable` and `cause`; the brand is a global symbol so `isInboxkitError` works across duplicate installs
// of the package, where `instanceof` would not.

const BRAND = Symbol.for('inboxkit.error');

/** Options shared by every inboxkit error. */
export interface InboxkitErrorOptions {
  /** The underlying error, kept for logs and for classification of wrapped errors. */
  readonly cause?: unknown;
}

/**
 * Base class of every error inboxkit throws. `code` is stable and documented; `retriable` says whether the
 * same message may succeed on a later attempt.
 */
export class InboxkitError extends Error {
  readonly code: string;
  readonly retriable: boolean;

  constructor(code: string, message: string, retriable: boolean, options: InboxkitErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = retriable;
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/** True for any inboxkit error, also one created by another copy of the package. */
export function isInboxkitError(value: unknown): value is InboxkitError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

/**
 * Thrown by a handler when the message can never succeed (a business rule rejects it). The message is
 * dead-lettered at once with reason `permanent-error`, without further attempts.
 *
 * @example
 * if (order.total < 0) throw new PermanentError('negative total');
 */
export class PermanentError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions & { code?: string } = {}) {
    super(options.code ?? 'PERMANENT', message, false, options);
  }
}

/**
 * Thrown by a handler when a later attempt may succeed. `delayMs`, when given, replaces the backoff
 * policy's delay for this attempt (for example a downstream's Retry-After).
 *
 * @example
 * if (res.status === 429) throw new RetryableError('rate limited', { delayMs: 2_000 });
 */
export class RetryableError extends InboxkitError {
  readonly delayMs: number | undefined;

  constructor(message: string, options: InboxkitErrorOptions & { delayMs?: number; code?: string } = {}) {
    super(options.code ?? 'RETRYABLE', message, true, options);
    this.delayMs = options.delayMs;
  }
}

/** A configuration value is invalid or inconsistent. Thrown at start-up; the message says what to change. */
export class ConfigurationError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('CONFIGURATION', message, false, options);
  }
}

/** The message body could not be decoded (not JSON, not UTF-8, empty). Dead-lettered as `undecodable`. */
export class DecodeError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('DECODE', message, false, options);
  }
}

/** The decoded payload failed the consumer's schema. Dead-lettered as `schema-invalid`. */
export class SchemaValidationError extends InboxkitError {
  /** The validator's issues, as it reported them. */
  readonly issues: readonly unknown[];

  constructor(message: string, issues: readonly unknown[], options: InboxkitErrorOptions = {}) {
    super('SCHEMA', message, false, options);
    this.issues = issues;
  }
}

/** The message has no usable id (missing, empty, too long or not printable). Dead-lettered at once. */
export class InvalidMessageIdError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('INVALID_MESSAGE_ID', message, false, options);
  }
}

/**
 * The handler's lease was taken over by another worker (leased mode): its completion was refused and its
 * transaction rolled back. Not an error of the message; the new holder finishes it.
 */
export class LeaseLostError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('LEASE_LOST', message, true, options);
  }
}

/** The inbox store could not be reached or failed; the message is retried, never acked. */
export class StoreUnavailableError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('STORE_UNAVAILABLE', message, true, options);
  }
}

/** The handler ran longer than its timeout; its signal was aborted. Retried with backoff. */
export class HandlerTimeoutError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('HANDLER_TIMEOUT', message, true, options);
  }
}

/** Publishing to a broker was not confirmed (nack, timeout, closed channel). The source is not acked. */
export class PublishError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('PUBLISH', message, true, options);
  }
}

/**
 * A message (or its retry or dead-letter copy) cannot be encoded for the broker: it exceeds a limit of the
 * broker or its client (amqplib's 64 KiB header table, Kafka's max.message.bytes, SQS's 256 KiB). Never
 * retriable: the same bytes are refused on every attempt, so it must not be held as if the broker were down.
 * `messageId` names the message when the publisher knows it (the outbox relay parks that row at once).
 */
export class MessageTooLargeError extends InboxkitError {
  readonly messageId: string | undefined;

  constructor(message: string, options: InboxkitErrorOptions & { messageId?: string } = {}) {
    super('MESSAGE_TOO_LARGE', message, false, options);
    this.messageId = options.messageId;
  }
}

/**
 * The handler ended, or tried to end, the transaction it was given (`context.tx`): it sent COMMIT, ROLLBACK, END,
 * ABORT, BEGIN or PREPARE TRANSACTION, touched the store's own savepoint, or called its library's
 * commit/rollback. The inbox row and the handler's writes commit together only inside that one transaction, so
 * such an attempt is never reported processed: it is dead-lettered with reason `transaction-control` (whatever
 * `isRetriable` says), so an operator looks. The statement is refused before it reaches Postgres wherever the
 * seam sees it first (then nothing was committed); `committed: 'unknown'` when it was found only afterwards.
 *
 * @example
 * // in a handler: wrong — the store commits the transaction with the inbox row
 * await tx.query('COMMIT'); // rejects with TransactionControlError; the message is dead-lettered
 */
export class TransactionControlError extends InboxkitError {
  /** What the handler sent or did (`COMMIT`, `ROLLBACK`, `trx.commit()` …). */
  readonly statement: string;
  /** `none`: refused before it was sent, nothing committed. `unknown`: found afterwards; part may have committed. */
  readonly committed: 'none' | 'unknown';

  constructor(statement: string, committed: 'none' | 'unknown', options: InboxkitErrorOptions = {}) {
    super(
      'TRANSACTION_CONTROL',
      committed === 'none'
        ? `the handler sent ${statement} through its transaction (context.tx): refused, nothing was committed. The store commits or rolls back that transaction with the inbox row; throw to roll back`
        : `the handler's transaction (context.tx) was ended by the handler (${statement}): the inbox row and its writes no longer commit together, so part of the effect may have committed. Dead-lettered for an operator to look`,
      false,
      options,
    );
    this.statement = statement;
    this.committed = committed;
  }
}

/** The `TransactionControlError` in `error` or its `cause` chain, if any (also one of another copy of the package). */
export function findTransactionControl(error: unknown): TransactionControlError | undefined {
  const seen = new Set<unknown>();
  for (
    let link = error;
    typeof link === 'object' && link !== null && !seen.has(link);
    link = (link as { cause?: unknown }).cause
  ) {
    seen.add(link);
    if (isInboxkitError(link) && link.code === 'TRANSACTION_CONTROL') return link as TransactionControlError;
  }
  return undefined;
}
