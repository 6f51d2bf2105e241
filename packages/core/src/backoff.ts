// The retry schedule: exponential backoff with full jitter (AWS "Exponential Backoff and Jitter"), and the
// retry horizon the dedupe window must cover.

import type { BackoffPolicy } from './consumer-types.js';

/** A backoff policy with every default filled in. */
export type ResolvedBackoff = Required<BackoffPolicy>;

/** The defaults: from 1 s, ×2, capped at 5 minutes, full jitter. */
export const DEFAULT_BACKOFF: ResolvedBackoff = Object.freeze({
  initialDelayMs: 1_000,
  multiplier: 2,
  maxDelayMs: 300_000,
  jitter: 'full',
});

/** The largest delay before the attempt after `failedAttempt` (1-based), before jitter. */
export function maxBackoffDelayMs(policy: ResolvedBackoff, failedAttempt: number): number {
  const exponent = Math.max(0, failedAttempt - 1);
  const raw = policy.initialDelayMs * Math.pow(policy.multiplier, exponent);
  return Math.min(policy.maxDelayMs, Number.isFinite(raw) ? raw : policy.maxDelayMs);
}

/**
 * The delay before the attempt after `failedAttempt`: uniform in [0, max] with full jitter, the max itself
 * without. Integer milliseconds.
 *
 * @example
 * backoffDelayMs({ ...DEFAULT_BACKOFF, jitter: 'none' }, 3) // 4000
 */
export function backoffDelayMs(policy: ResolvedBackoff, failedAttempt: number, random: () => number = Math.random): number {
  const max = maxBackoffDelayMs(policy, failedAttempt);
  return Math.round(policy.jitter === 'full' ? random() * max : max);
}

/**
 * The longest time a message can spend being retried: the sum of the largest delays between `maxAttempts`
 * attempts. The dedupe window must be at least this long, or a late retry could find its id forgotten.
 */
export function retryHorizonMs(policy: ResolvedBackoff, maxAttempts: number): number {
  let total = 0;
  for (let attempt = 1; attempt < maxAttempts; attempt++) total += maxBackoffDelayMs(policy, attempt);
  return total;
}
