// The torture harness can fail: with a deliberately non-idempotent consumer (the effect written on its own
// connection, outside the inbox transaction) a small run on SQS must report effects applied twice; with
// consumers that dead-letter a healthy id (maxAttempts 1: the ids whose first attempt fails go to the DLQ with
// `max-attempts`, as healthy records did when crashes were charged to them) it must report healthy ids
// dead-lettered; with the real consumer the same run must report no violation. Seeded, so the runs plan the
// same stream and kills. The checker itself is also fed a healthy id in the DLQ directly.

import { describe, expect, it } from 'vitest';

import { checkInvariant } from './check-invariant.js';
import type { InboxState } from './check-invariant.js';
import { planMessages } from './message-plan.js';
import { seededRandom } from './prng.js';
import type { TortureOptions } from './run-torture.js';
import { runTorture, SHARES } from './run-torture.js';

const SEED = 20_251_129;
const MESSAGES = 200;

function options(broken: boolean, overrides: Partial<TortureOptions> = {}): TortureOptions {
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
    ...overrides,
  };
}

const plan = planMessages(seededRandom(SEED, 'sqs').fork('plan'), {
  messages: MESSAGES,
  duplicateShare: SHARES.duplicates,
  poisonShare: SHARES.poison,
  transientShare: SHARES.transient,
  prefix: 'x',
});

/** What a correct run leaves: every good id applied once and completed, every poison id in the DLQ. */
function correctEvidence() {
  const effects = new Map<string, number>();
  const inbox = new Map<string, InboxState>();
  for (const id of plan.good) {
    effects.set(id, 1);
    inbox.set(id, { status: 'completed', reason: null });
  }
  const deadLetters = [...plan.poison].map(([id, reason]) => ({ id, reason }));
  for (const [id, reason] of plan.poison) inbox.set(id, { status: 'dead_lettered', reason });
  return { effects, inbox, deadLetters };
}

describe('torture harness', () => {
  it('plans ids whose first attempt fails after its effect (what exposes an effect outside the transaction)', () => {
    expect([...plan.kinds.values()].filter((k) => k === 'transient').length).toBeGreaterThanOrEqual(2);
  });

  it('passes what a correct run leaves, and reports a healthy id in the DLQ even when it was applied too', () => {
    expect(checkInvariant(plan, correctEvidence()).violations).toEqual([]);
    const healthy = [...plan.good][3]!;
    const evidence = correctEvidence();
    const withHealthy = {
      ...evidence,
      deadLetters: [...evidence.deadLetters, { id: healthy, reason: 'max-attempts' }],
    };
    const verdict = checkInvariant(plan, withHealthy);
    expect(verdict.healthyDeadLettered).toBe(1);
    expect(verdict.violations).toEqual([`healthy ids dead-lettered: 1 ids (${healthy} (max-attempts))`]);
    // And one dead-lettered instead of applied: in the DLQ, its inbox row dead_lettered, no effect.
    evidence.effects.delete(healthy);
    evidence.inbox.set(healthy, { status: 'dead_lettered', reason: 'max-attempts' });
    const instead = checkInvariant(plan, { ...evidence, deadLetters: withHealthy.deadLetters });
    expect(instead.healthyDeadLettered).toBe(1);
    expect(instead.lost).toBe(1);
    expect(instead.violations.join('\n')).toMatch(/healthy ids dead-lettered: 1 ids/);
  });

  it(
    'reports healthy ids dead-lettered when the consumers dead-letter ids that never failed for good',
    { timeout: 240_000 },
    async () => {
      const [report] = await runTorture(options(false, { kills: 0, maxAttempts: 1 }));
      expect(report!.error).toBeUndefined();
      const transient = [...plan.kinds.values()].filter((k) => k === 'transient').length;
      expect(transient).toBeGreaterThanOrEqual(2);
      expect(report!.verdict!.healthyDeadLettered).toBe(transient);
      expect(report!.verdict!.violations.join('\n')).toMatch(/healthy ids dead-lettered/);
      expect(report!.verdict!.appliedTwice).toBe(0);
    },
  );

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
    expect(report!.verdict!.healthyDeadLettered).toBe(0);
    expect(report!.kills).toBe(1);
  });
});
