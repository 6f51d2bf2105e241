// FastPathGuard's policy on a real Redis of the test's own, stalled with CLIENT PAUSE: one stall that times out
// every lookup in flight at once does not switch the fast path off; a stall that goes on does, and from then on
// a lookup costs nothing until the bypass ends.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FastPathGuard } from '../src/fast-path-guard.js';
import { redisFastPath } from '../src/redis/index.js';
import {
  connectRedis,
  startPrivateRedis,
  type PrivateRedis,
  type TestRedis,
} from '../../../test/support/redis.js';
import { recordingLogger } from '../../../test/support/recording-logger.js';

let server: PrivateRedis;
let client: TestRedis;
let admin: TestRedis;
beforeAll(async () => {
  server = await startPrivateRedis();
  client = await connectRedis(server.url);
  admin = await connectRedis(server.url);
});
afterAll(async () => {
  await client?.quit().catch(() => undefined);
  await admin?.quit().catch(() => undefined);
  await server?.stop();
});

/** Pauses every client of the private Redis for `ms` (the admin's own later commands wait too). */
const pause = (ms: number): Promise<unknown> => admin.sendCommand(['CLIENT', 'PAUSE', String(ms), 'ALL']);

/**
 * Stalls Redis for 5 s (CLIENT PAUSE; an unpause would wait behind the pause too, so it simply ends). Long
 * enough for the waves below to bypass it however loaded the machine; the tests that follow wait at most that.
 */
const stall = (): Promise<unknown> => pause(5_000);

/** Waves of lookups until one answers `bypassed`; how many it took (at most 40, then the count so far). */
async function wavesUntilBypassed(guard: FastPathGuard, id: string): Promise<number> {
  for (let waves = 1; waves <= 40; waves++) if ((await wave(guard, id)).includes('bypassed')) return waves;
  return Infinity;
}

/** 16 lookups at once, as a consumer at concurrency 16 sends them. */
const wave = (guard: FastPathGuard, id: string) =>
  Promise.all(Array.from({ length: 16 }, () => guard.check('guard', id, 'fp')));

describe('FastPathGuard', () => {
  it('keeps looking up after one stall that times out every lookup in flight at once', async () => {
    const cache = redisFastPath({ client, timeoutMs: 20 });
    await cache.remember('guard', 'a', 'fp', 60_000);
    const guard = new FastPathGuard(cache);
    expect(await guard.check('guard', 'a', 'fp')).toBe('hit');
    await pause(40);
    expect(new Set(await wave(guard, 'a'))).toEqual(new Set(['timeout']));
    // The stall is over: Redis answers again, and the guard asks it.
    await admin.sendCommand(['PING']);
    expect(await guard.check('guard', 'a', 'fp')).toBe('hit');
  });

  it('leaves a cache that keeps failing alone, and then a lookup costs nothing', async () => {
    const cache = redisFastPath({ client, timeoutMs: 20 });
    await cache.remember('guard', 'b', 'fp', 60_000);
    const { logger, warnings } = recordingLogger();
    // A bypass far longer than the test, so that it cannot end (and a second one begin) however slowly a loaded
    // machine runs the waves; its length is not what this test is about.
    const guard = new FastPathGuard(cache, { logger, label: 'billing: fast path', bypassMs: 600_000 });
    expect(await guard.check('guard', 'b', 'fp')).toBe('hit');
    await stall();
    // Bypassed within a few waves of timeouts (10 failures that have gone on for 50 ms), not after the whole
    // stall: counted in waves, not in wall-clock time, so a slow machine cannot fail it.
    expect(await wavesUntilBypassed(guard, 'b')).toBeLessThanOrEqual(8);
    // From then on a lookup does not ask the cache (one that asked the stalled Redis would answer timeout).
    expect(await guard.check('guard', 'b', 'fp')).toBe('bypassed');
    // Switching itself off is said once, with who and for how long.
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.obj).toMatchObject({ fastPath: 'billing: fast path', bypassMs: 600_000 });
    expect((warnings[0]?.obj as { failures: number }).failures).toBeGreaterThanOrEqual(10);
    expect(warnings[0]?.msg).toMatch(/^billing: fast path: the cache failed \d+ times in a row/);
  });

  it('answers the lookup that switches it off even when the logger throws on the warning', async () => {
    const cache = redisFastPath({ client, timeoutMs: 20 });
    let warned = 0;
    const throwing = {
      debug: () => undefined,
      info: () => undefined,
      warn: () => {
        warned += 1;
        throw new Error('the log destination is closed');
      },
      error: () => undefined,
    };
    const guard = new FastPathGuard(cache, { logger: throwing, bypassMs: 600_000 });
    await stall();
    expect(await wavesUntilBypassed(guard, 'c')).toBeLessThanOrEqual(8);
    expect(warned).toBe(1);
  });
});
