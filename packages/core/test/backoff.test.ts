import { describe, expect, it } from 'vitest';
import { backoffDelayMs, DEFAULT_BACKOFF, maxBackoffDelayMs, retryHorizonMs } from '../src/backoff.js';

describe('backoff', () => {
  it('grows exponentially from the initial delay up to the cap', () => {
    const policy = { ...DEFAULT_BACKOFF, jitter: 'none' as const };
    expect([1, 2, 3, 4, 5].map((a) => backoffDelayMs(policy, a))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000]);
    expect(maxBackoffDelayMs(policy, 30)).toBe(300_000);
    expect(maxBackoffDelayMs(policy, 10_000)).toBe(300_000);
  });

  it('draws full jitter uniformly below the computed delay', () => {
    expect(backoffDelayMs(DEFAULT_BACKOFF, 3, () => 0)).toBe(0);
    expect(backoffDelayMs(DEFAULT_BACKOFF, 3, () => 0.5)).toBe(2_000);
    expect(backoffDelayMs(DEFAULT_BACKOFF, 3, () => 0.999999)).toBeLessThanOrEqual(4_000);
  });

  it('sums the largest delays between attempts into the retry horizon', () => {
    expect(retryHorizonMs(DEFAULT_BACKOFF, 1)).toBe(0);
    expect(retryHorizonMs(DEFAULT_BACKOFF, 5)).toBe(1_000 + 2_000 + 4_000 + 8_000);
    expect(retryHorizonMs(DEFAULT_BACKOFF, 12)).toBe(1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 32_000 + 64_000 + 128_000 + 256_000 + 300_000 + 300_000);
  });
});
