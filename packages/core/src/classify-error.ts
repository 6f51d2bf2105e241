// Decides whether a handler's failure may succeed on a later attempt (DESIGN §3). Retrying is the safe
// default: an unknown error is retried until maxAttempts, then dead-lettered.

import { isInboxkitError } from './errors.js';

/** The verdict on one error. */
export interface ErrorClassification {
  /** True: retry with backoff. False: dead-letter now with reason `permanent-error`. */
  readonly retriable: boolean;
  /** A delay requested by the error (`RetryableError.delayMs`), replacing the backoff for this attempt. */
  readonly delayMs: number | undefined;
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

/**
 * Classifies a handler error:
 * - `isRetriable(error)`, when given, decides (a `RetryableError`'s delay is still honoured);
 * - an inboxkit error (`RetryableError`, `PermanentError`, `DecodeError` …) carries its own `retriable`;
 * - anything whose `cause` chain holds a transient network error (ECONNRESET, ECONNREFUSED, ETIMEDOUT, EPIPE,
 *   `UND_ERR_*`, a Postgres connection/serialization failure …) is retriable, so `TypeError('fetch failed')`
 *   wrapping a connection reset is retried;
 * - `TypeError`, `RangeError`, `ReferenceError`, `SyntaxError` are permanent (programmer errors);
 * - `AbortError`/`TimeoutError` and everything else is retriable.
 *
 * @example
 * classifyError(new TypeError('fetch failed', { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }))
 * // { retriable: true, delayMs: undefined }
 */
export function classifyError(error: unknown, isRetriable?: (error: unknown) => boolean): ErrorClassification {
  const delayMs = requestedDelay(error);
  if (isRetriable !== undefined) return { retriable: isRetriable(error), delayMs };
  if (isInboxkitError(error)) return { retriable: error.retriable, delayMs };
  const links = chain(error);
  if (links.some(isTransientNetworkError)) return { retriable: true, delayMs };
  for (const link of links) {
    if (isInboxkitError(link)) return { retriable: link.retriable, delayMs: requestedDelay(link) };
  }
  const name = nameOf(error);
  if (name !== undefined && PROGRAMMER_ERRORS.has(name)) return { retriable: false, delayMs };
  return { retriable: true, delayMs };
}

function requestedDelay(error: unknown): number | undefined {
  if (!isInboxkitError(error)) return undefined;
  const delay = (error as { delayMs?: unknown }).delayMs;
  return typeof delay === 'number' && Number.isFinite(delay) && delay >= 0 ? Math.round(delay) : undefined;
}
