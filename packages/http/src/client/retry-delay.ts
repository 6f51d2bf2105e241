// The client's backoff: exponential, capped, with jitter of 50–100% of the computed delay, so retries of many
// clients spread out without ever retrying sooner than half the schedule.

/** Backoff settings of the client helper. */
export interface ClientBackoff {
  /** Delay before the first retry, before jitter. Default is 500 ms. */
  readonly baseDelayMs?: number;
  /** Growth per retry. Default is 2. */
  readonly multiplier?: number;
  /** Largest delay, before jitter; also caps a server's Retry-After. Default is 10 s. */
  readonly maxDelayMs?: number;
}

/**
 * The delay before retry number `retry` (1 for the first retry): min(max, base × multiplier^(retry−1)), times
 * a factor in [0.5, 1] from `random` (default Math.random).
 *
 * @example
 * retryDelayMs(3, { baseDelayMs: 100 }, () => 1); // 400
 */
export function retryDelayMs(
  retry: number,
  backoff: ClientBackoff = {},
  random: () => number = Math.random,
): number {
  const base = backoff.baseDelayMs ?? 500;
  const max = backoff.maxDelayMs ?? 10_000;
  const computed = Math.min(max, base * (backoff.multiplier ?? 2) ** Math.max(0, retry - 1));
  return Math.round(computed * (0.5 + 0.5 * random()));
}
