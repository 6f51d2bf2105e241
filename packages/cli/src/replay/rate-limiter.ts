// Spaces publishes evenly at N per second, so a replay does not flood a consumer that has just recovered.

import type { Clock } from './clock.js';

/** The longest wait a Node.js timer holds (2^31-1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 2_147_483_647;
/** The slowest rate a `RateLimiter` can keep: one message every `MAX_TIMER_MS`. */
export const MIN_RATE_PER_SECOND = 1000 / MAX_TIMER_MS;

/**
 * Why `perSecond` cannot be a rate limit, naming the limit, or `undefined` when it can. `name` is how the
 * caller knows the value (`--rate 0.0000001`, `ratePerSecond 1e-7`).
 *
 * @example
 * rateProblem(1e-7, 'ratePerSecond 1e-7');
 * // 'ratePerSecond 1e-7 spaces messages 10000000000 ms apart, longer than a timer can wait (2147483647 ms, about 24.8 days): use at least 4.66e-7 per second'
 */
export function rateProblem(perSecond: number, name: string): string | undefined {
  if (!(perSecond > 0) || !Number.isFinite(perSecond))
    return `${name} is not a positive number of messages per second`;
  const intervalMs = 1000 / perSecond;
  if (intervalMs <= MAX_TIMER_MS) return undefined;
  return `${name} spaces messages ${Math.round(intervalMs)} ms apart, longer than a timer can wait (${MAX_TIMER_MS} ms, about 24.8 days): use at least ${MIN_RATE_PER_SECOND.toPrecision(3)} per second`;
}

/**
 * Lets callers through at most `perSecond` times a second, evenly spaced (no bursts): the k-th `acquire()`
 * resolves no earlier than `first + k / perSecond` seconds.
 *
 * @example
 * const limiter = new RateLimiter(50, systemClock);
 * for (const m of messages) { await limiter.acquire(); await publish(m); }
 */
export class RateLimiter {
  readonly #intervalMs: number;
  readonly #clock: Clock;
  #next: number | undefined;

  /** Throws a `RangeError` for a rate that is not positive, or slower than `MIN_RATE_PER_SECOND`. */
  constructor(perSecond: number, clock: Clock) {
    if (!(perSecond > 0) || !Number.isFinite(perSecond)) {
      throw new RangeError(`rate must be a positive number of messages per second, got ${perSecond}`);
    }
    const problem = rateProblem(perSecond, `a rate of ${perSecond} per second`);
    if (problem !== undefined) throw new RangeError(problem);
    this.#intervalMs = 1000 / perSecond;
    this.#clock = clock;
  }

  /** Waits until the next slot, then takes it. Returns early, without taking a slot, when `signal` aborts. */
  async acquire(signal?: AbortSignal): Promise<void> {
    const now = this.#clock.now();
    const slot = this.#next === undefined ? now : Math.max(this.#next, now);
    if (slot > now) await this.#clock.sleep(slot - now, signal);
    if (signal?.aborted === true) return;
    this.#next = slot + this.#intervalMs;
  }
}
