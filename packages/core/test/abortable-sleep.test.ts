// abortableSleep waits out a delay the inbox measured (a retry's available time) before a transport claims again
// (NATS with orderedBySubject, the delivery guard's outage hold). A timer that fires before the delay has passed
// in real time made the next claim early: the inbox answered "not yet" (a retry of attempt 0, delay 1 ms) and
// the NATS ordered conformance check saw an extra retry (CI rehearsal ci15). Node's timers can fire early because
// they count from the event loop's cached clock; here they are made to fire 15 ms early on purpose.

import { afterEach, describe, expect, it, vi } from 'vitest';

import { abortableSleep } from '../src/start-retry.js';

const realSetTimeout = globalThis.setTimeout;

/** setTimeout as a busy event loop can behave: the callback comes `earlyMs` before the delay has passed. */
function timersFireEarly(earlyMs: number): void {
  vi.stubGlobal('setTimeout', (callback: () => void, ms?: number) =>
    realSetTimeout(callback, Math.max(0, (ms ?? 0) - earlyMs)),
  );
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('abortableSleep', () => {
  it('resolves only once the whole delay has passed in real time, even when a timer fires early', async () => {
    timersFireEarly(15);
    for (const ms of [20, 50, 100]) {
      const started = performance.now();
      await abortableSleep(ms, new AbortController().signal);
      expect(performance.now() - started).toBeGreaterThanOrEqual(ms);
    }
  });

  it('resolves at once when the signal aborts during the sleep, or was aborted before', async () => {
    const stop = new AbortController();
    const started = performance.now();
    const sleeping = abortableSleep(60_000, stop.signal);
    realSetTimeout(() => stop.abort(), 20);
    await sleeping;
    expect(performance.now() - started).toBeLessThan(10_000);

    const before = performance.now();
    await abortableSleep(60_000, stop.signal);
    await abortableSleep(0, new AbortController().signal);
    await abortableSleep(-5, new AbortController().signal);
    expect(performance.now() - before).toBeLessThan(1_000);
  });
});
