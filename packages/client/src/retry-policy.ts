// What a response means for an intent, decided in one place: final success, final failure, or try again later
// (when). The queue only records the verdict.

import type { IntentFailure } from './intent.js';

/** The queue's backoff: full jitter over an exponential schedule, as AWS's guidance describes. */
export interface Backoff {
  /** The delay cap before the first retry. Default is 1,000 ms. */
  readonly baseDelayMs?: number;
  /** The largest cap. Default is 60,000 ms. */
  readonly maxDelayMs?: number;
}

/**
 * The delay before retry number `retry` (1 for the first): a uniform draw in [0, min(max, base × 2^(retry−1))).
 * Full jitter spreads the retries of a thousand clients coming back online at once.
 *
 * @example
 * backoffDelayMs(3, { baseDelayMs: 100 }, () => 0.5); // 200
 */
export function backoffDelayMs(retry: number, backoff: Backoff = {}, random = Math.random): number {
  const cap = Math.min(
    backoff.maxDelayMs ?? 60_000,
    (backoff.baseDelayMs ?? 1000) * 2 ** Math.max(0, retry - 1),
  );
  return Math.floor(random() * cap);
}

/** `Retry-After` in ms (seconds or an HTTP date), or undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now: number): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The verdict on one response: `retry` (transient), or final with the failure when it failed. */
export type Verdict = { readonly retry: true } | { readonly retry: false; readonly failure?: IntentFailure };

/**
 * 408, 409 (the first request with this key is still in flight), 429 and 5xx: retry with the same key. 2xx/3xx,
 * replayed or not: success. 422 `Idempotency-Key reused`: a client bug, never retried. Any other 4xx: the
 * handler's stored answer, final.
 */
export function verdictOf(status: number, body: string): Verdict {
  if (status === 408 || status === 409 || status === 429 || status >= 500) return { retry: true };
  if (status < 400) return { retry: false };
  return {
    retry: false,
    failure: status === 422 && /Idempotency-Key reused/i.test(body) ? 'key-reused' : 'rejected',
  };
}
