// Time as the replay engine sees it. Injected so tests check the rate limit against a fake clock instead of
// waiting on the wall clock.

/** A source of the current time and a way to wait. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms` milliseconds, at once for `ms <= 0`, or early when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real clock: `Date.now()` and `setTimeout`. */
export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  sleep: (ms: number, signal?: AbortSignal) =>
    new Promise<void>((resolve) => {
      if (ms <= 0 || signal?.aborted === true) {
        resolve();
        return;
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      // A timer holds at most 2^31-1 ms (a longer one fires at once): a longer wait is taken in parts.
      let left = ms;
      const next = (): void => {
        const part = Math.min(left, 2_147_483_647);
        left -= part;
        timer = setTimeout(left > 0 ? next : done, part);
      };
      next();
      signal?.addEventListener('abort', done, { once: true });
    }),
});
