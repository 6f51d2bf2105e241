// idempotentFetch(): the client's side of the Idempotency-Key contract. One key per intent (one call), the same
// key on every retry, exponential backoff with jitter, and retries only where a retry cannot do harm.

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { injectTraceHeaders } from '@inboxkit/core';
import { retryDelayMs, type ClientBackoff } from './retry-delay.js';

/** Options of `idempotentFetch`. */
export interface IdempotentFetchOptions extends ClientBackoff {
  /** The key of this intent. Default is a fresh UUID per call; pass your own to resume an intent after a restart. */
  readonly key?: string;
  /** Attempts in all, the first included. Default is 5. */
  readonly maxAttempts?: number;
  /** The fetch to use. Default is the global fetch. */
  readonly fetch?: typeof fetch;
  /** Jitter source in [0, 1). Default is Math.random. */
  readonly random?: () => number;
  /** Called before each retry (for logs and tests). */
  readonly onRetry?: (info: {
    readonly attempt: number;
    readonly delayMs: number;
    readonly reason: string;
  }) => void;
}

/** True for the statuses a retry with the same key is safe and useful for: 409, 429 and 5xx. */
export function isRetriableStatus(status: number): boolean {
  return status === 409 || status === 429 || status >= 500;
}

function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get('retry-after');
  if (value === null) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * Sends a request with an `Idempotency-Key` and retries it with the same key on 409, 429, 5xx and network
 * errors, never on other 4xx (a 400 or 422 will not change by asking again). Waits Retry-After when the server
 * sends one (capped at maxDelayMs), else the backoff. Resolves with the last response; rejects with the last
 * network error, or at once when `init.signal` aborts. The body must be re-sendable (a string or bytes).
 *
 * It keeps nothing across a restart and imports `node:crypto`: for browsers and apps, and for intents that must
 * survive a reload, a crash or a period offline, use `@inboxkit/client` (`createIntentQueue`, docs/client.md).
 *
 * @example
 * const response = await idempotentFetch('https://api.example.com/payments', {
 *   method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount: 100 }),
 * });
 */
export async function idempotentFetch(
  input: string | URL,
  init: RequestInit = {},
  options: IdempotentFetchOptions = {},
): Promise<Response> {
  const key = options.key ?? randomUUID();
  const maxAttempts = options.maxAttempts ?? 5;
  const doFetch = options.fetch ?? fetch;
  const headers = new Headers(init.headers);
  headers.set('idempotency-key', key);
  // The caller's trace goes along (`traceparent`), unless the caller set its own.
  for (const [name, value] of Object.entries(injectTraceHeaders({}))) if (!headers.has(name)) headers.set(name, value);
  for (let attempt = 1; ; attempt++) {
    let reason: string;
    let serverDelay: number | undefined;
    try {
      const response = await doFetch(input, { ...init, headers });
      if (!isRetriableStatus(response.status) || attempt >= maxAttempts) return response;
      reason = `status ${response.status}`;
      serverDelay = retryAfterMs(response);
      await response.body?.cancel();
    } catch (error) {
      if (init.signal?.aborted || attempt >= maxAttempts) throw error;
      reason = error instanceof Error ? error.message : String(error);
    }
    const delayMs =
      serverDelay === undefined
        ? retryDelayMs(attempt, options, options.random)
        : Math.min(serverDelay, options.maxDelayMs ?? 10_000);
    options.onRetry?.({ attempt, delayMs, reason });
    await sleep(delayMs, undefined, { signal: init.signal ?? undefined });
  }
}
