// Spaces publishes evenly at N per second, so a replay does not flood a consumer that has just recovered.

import type { Clock } from './clock.js';

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

  constructor(perSecond: number, clock: Clock) {
    if (!(perSecond > 0) || !Number.isFinite(perSecond)) {
      throw new RangeError(`rate must be a positive number of messages per second, got ${perSecond}`);
    }
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
