// Decides whether a handler's failure may succeed on a later attempt (DESIGN §3). Retrying is the safe
// default: an unknown error is retried until maxAttempts, then dead-lettered.

import { isInboxkitError } from './errors.js';

/** The verdict on one error. */
export interface ErrorClassification {
  /** True: retry with backoff. False: dead-letter now with reason `permanent-error`. */
  readonly retriable: boolean;
  /** A delay requested by the error (`RetryableError.delayMs`), replacing the backoff for this attempt. */
  readonly delayMs: number | undefined;
  /** Set when `isRetriable` threw: what it threw. The built-in classification decided instead. */
  readonly classifierError?: unknown;
}

/** Socket and DNS failures that say nothing about the message: always transient, whatever wraps them. */
const TRANSIENT_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ESOCKETTIMEDOUT',
]);

/** Postgres SQLSTATE classes and codes that are transient: connection, resources, serialization, shutdown. */
const TRANSIENT_SQLSTATE = /^(08|53|57P0[1-3]|40001|40P01|55P03|58)/;

/**
 * Postgres SQLSTATEs of a statement refused for the data it carries, which the same data meets again on every
 * attempt: class 22 (data exception: 22P02 invalid text representation, 22P05 untranslatable character, 22001
 * value too long, 22003 out of range, 22007/22008 bad date, 22012 division by zero, …) and, of class 23, the
 * violations no other row can change: 23000 (integrity constraint), 23502 (not null), 23514 (check). The rest
 * of class 23 stays retriable, because another message or a concurrent writer can make the next attempt
 * succeed: 23503 (foreign key: the parent may arrive later), 23505 (unique) and 23P01 (exclusion: a concurrent
 * writer won; the retry sees its row), 23001 (restrict: the referencing row may go).
 */
const PERMANENT_SQLSTATE = /^(22[0-9A-Z]{3}|23000|23502|23514)$/;

/** Errors that are bugs in the handler: retrying runs the same bug again. */
const PROGRAMMER_ERRORS = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError']);

const MAX_CAUSE_DEPTH = 16;

/** The error and its `cause` chain (and AggregateError members), outermost first, cycle-safe. */
function chain(error: unknown): unknown[] {
  const out: unknown[] = [];
  const queue: unknown[] = [error];
  const seen = new Set<unknown>();
  while (queue.length > 0 && out.length < MAX_CAUSE_DEPTH) {
    const e = queue.shift();
    if (e === undefined || e === null || seen.has(e)) continue;
    seen.add(e);
    out.push(e);
    if (typeof e === 'object') {
      const { cause, errors } = e as { cause?: unknown; errors?: unknown };
      if (cause !== undefined) queue.push(cause);
      if (Array.isArray(errors)) queue.push(...(errors as unknown[]));
    }
  }
  return out;
}

function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function nameOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const name = (error as { name?: unknown }).name;
  return typeof name === 'string' ? name : undefined;
}

/** True when `error` is a socket, DNS, undici or transient Postgres failure. */
export function isTransientNetworkError(error: unknown): boolean {
  const code = codeOf(error);
  if (code === undefined) return false;
  return TRANSIENT_CODES.has(code) || code.startsWith('UND_ERR_') || (code.length === 5 && TRANSIENT_SQLSTATE.test(code));
}

/** True when `error` is a Postgres error (a five-character SQLSTATE `code`) that retrying the same data repeats. */
export function isPermanentDataError(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && PERMANENT_SQLSTATE.test(code);
}

/** SQLSTATE classes of a statement refused for what it carries: 22 (data exception), 54 (program limit exceeded). */
const CONTENT_REJECTED_SQLSTATE = /^(22|54)[0-9A-Z]{3}$/;

/**
 * The SQLSTATE when a store's error holds, in its `cause` chain, Postgres refusing the content of a write (class
 * 22 or 54), else `undefined`. Writing the same values fails again whatever the database's health, unlike an
 * outage (class 08, 57P0x, 53, socket errors), which a later attempt gets past.
 */
export function contentRejection(error: unknown): string | undefined {
  try {
    for (const link of chain(error)) {
      const code = codeOf(link);
      if (code !== undefined && CONTENT_REJECTED_SQLSTATE.test(code)) return code;
    }
  } catch {
    // A getter threw while the chain was read: not a recognisable refusal.
  }
  return undefined;
}

/**
 * Classifies a handler error:
 * - `isRetriable(error)`, when given, decides (a `RetryableError`'s delay is still honoured); if it throws, the
 *   built-in rules below decide and `classifierError` holds what it threw;
 * - an inboxkit error (`RetryableError`, `PermanentError`, `DecodeError` …) carries its own `retriable`;
 * - anything whose `cause` chain holds a transient network error (ECONNRESET, ECONNREFUSED, ETIMEDOUT, EPIPE,
 *   `UND_ERR_*`, a Postgres connection/serialization failure …) is retriable, so `TypeError('fetch failed')`
 *   wrapping a connection reset is retried;
 * - a Postgres data error anywhere in the chain (SQLSTATE class 22, and 23000, 23502, 23514: see
 *   `isPermanentDataError`) is permanent: the same data fails the same way on every attempt;
 * - `TypeError`, `RangeError`, `ReferenceError`, `SyntaxError` are permanent (programmer errors);
 * - `AbortError`/`TimeoutError` and everything else is retriable.
 *
 * @example
 * classifyError(new TypeError('fetch failed', { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }))
 * // { retriable: true, delayMs: undefined }
 */
export function classifyError(error: unknown, isRetriable?: (error: unknown) => boolean): ErrorClassification {
  let delayMs: number | undefined;
  try {
    delayMs = requestedDelay(error);
  } catch {
    delayMs = undefined;
  }
  if (isRetriable !== undefined) {
    try {
      return { retriable: isRetriable(error), delayMs };
    } catch (classifierError) {
      return { ...builtIn(error, delayMs), classifierError };
    }
  }
  return builtIn(error, delayMs);
}

/** The built-in rules; an error whose properties throw when read is retriable (the safe default). */
function builtIn(error: unknown, delayMs: number | undefined): ErrorClassification {
  try {
    if (isInboxkitError(error)) return { retriable: error.retriable, delayMs };
    const links = chain(error);
    if (links.some(isTransientNetworkError)) return { retriable: true, delayMs };
    for (const link of links) {
      if (isInboxkitError(link)) return { retriable: link.retriable, delayMs: requestedDelay(link) };
    }
    if (links.some(isPermanentDataError)) return { retriable: false, delayMs };
    const name = nameOf(error);
    if (name !== undefined && PROGRAMMER_ERRORS.has(name)) return { retriable: false, delayMs };
  } catch {
    // A getter or proxy threw while the chain was read: nothing is known, so retry (bounded by maxAttempts).
  }
  return { retriable: true, delayMs };
}

function requestedDelay(error: unknown): number | undefined {
  if (!isInboxkitError(error)) return undefined;
  const delay = (error as { delayMs?: unknown }).delayMs;
  return typeof delay === 'number' && Number.isFinite(delay) && delay >= 0 ? Math.round(delay) : undefined;
}
