// The torture harness can fail: with a deliberately non-idempotent consumer (the effect written on its own
// connection, outside the inbox transaction) a small run on SQS must report effects applied twice; with the
// real consumer the same run must report no violation. Seeded, so both runs plan the same stream and kills.

import { describe, expect, it } from 'vitest';

import { planMessages } from './message-plan.js';
import { seededRandom } from './prng.js';
import type { TortureOptions } from './run-torture.js';
import { runTorture, SHARES } from './run-torture.js';

const SEED = 20_251_129;
const MESSAGES = 200;

function options(broken: boolean): TortureOptions {
  return {
    transports: ['sqs'],
    messages: MESSAGES,
    kills: 1,
    consumers: 2,
    seed: SEED,
    durationSeconds: 8,
    drainTimeoutSeconds: 90,
    restartBroker: false,
    restartPostgres: false,
    broken,
    maxAttempts: 5,
    handlerDelayMs: 4,
    // The broken run fails by design: leave nothing behind.
    keep: 'never',
    log: () => undefined,
  };
}

describe('torture harness', () => {
  it('plans ids whose first attempt fails after its effect (what exposes an effect outside the transaction)', () => {
    const plan = planMessages(seededRandom(SEED, 'sqs').fork('plan'), {
      messages: MESSAGES,
      duplicateShare: SHARES.duplicates,
      poisonShare: SHARES.poison,
      transientShare: SHARES.transient,
      prefix: 'x',
    });
    expect([...plan.kinds.values()].filter((k) => k === 'transient').length).toBeGreaterThanOrEqual(2);
  });

  it(
    'reports effects applied twice when the effect is written outside the inbox transaction',
    { timeout: 240_000 },
    async () => {
      const [report] = await runTorture(options(true));
      expect(report!.error).toBeUndefined();
      expect(report!.verdict!.appliedTwice).toBeGreaterThan(0);
      expect(report!.verdict!.violations.join('\n')).toMatch(/effects applied twice/);
    },
  );

  it('reports no violation with the real consumer on the same seed', { timeout: 240_000 }, async () => {
    const [report] = await runTorture(options(false));
    expect(report!.error).toBeUndefined();
    expect(report!.verdict!.violations).toEqual([]);
    expect(report!.verdict!.appliedTwice).toBe(0);
    expect(report!.verdict!.lost).toBe(0);
    expect(report!.kills).toBe(1);
  });
});
