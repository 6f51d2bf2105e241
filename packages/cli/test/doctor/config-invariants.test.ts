// The configuration invariants doctor checks: each failure names the setting and what to change it to.

import { describe, expect, it } from 'vitest';

import {
  checkConfigInvariants,
  retryHorizonMs,
  worstCaseRetryTimeMs,
} from '../../src/doctor/config-invariants.js';
import { CORE_DEFAULTS, readConsumerSettings } from '../../src/doctor/consumer-settings.js';

const defaults = { name: 'orders', ...CORE_DEFAULTS };

describe('checkConfigInvariants', () => {
  it("passes core's defaults", () => {
    const checks = checkConfigInvariants(defaults);
    expect(checks.filter((c) => c.status === 'fail')).toEqual([]);
  });

  it("computes core's retry horizon from backoff and attempts, and the worst case with attempt timeouts", () => {
    // 4 delays: 1s, 2s, 4s, 8s = 15s; plus 5 attempts × 30s handler timeout in the worst case.
    expect(retryHorizonMs(defaults)).toBe(15_000);
    expect(worstCaseRetryTimeMs(defaults)).toBe(15_000 + 150_000);
    // capped delays: 20 attempts → 1+2+4+…+256 s (511 s) then 10 × 300 s.
    expect(retryHorizonMs({ ...defaults, maxAttempts: 20 })).toBe(511_000 + 10 * 300_000);
  });

  it('fails a dedupe window shorter than the retry horizon (as core does at start-up) and says how long it must be', () => {
    const [window] = checkConfigInvariants({ ...defaults, dedupeWindowMs: 10_000 });
    expect(window).toMatchObject({
      status: 'fail',
      fix: expect.stringMatching(/raise dedupeWindow to at least 15s/),
    });
  });

  it('warns when the window covers the backoff but not attempts running to their timeout', () => {
    const [window] = checkConfigInvariants({ ...defaults, dedupeWindowMs: 60_000 });
    expect(window).toMatchObject({ status: 'warn', fix: expect.stringMatching(/at least 2m 45s/) });
  });

  it('fails a lease not above the handler timeout in leased mode only', () => {
    const bad = { ...defaults, mode: 'leased' as const, leaseMs: 30_000, handlerTimeoutMs: 30_000 };
    expect(checkConfigInvariants(bad).find((c) => c.name.includes('lease'))).toMatchObject({
      status: 'fail',
      fix: expect.stringMatching(/raise lease above 30s/),
    });
    expect(
      checkConfigInvariants({ ...bad, mode: 'transactional' }).find((c) => c.name.includes('lease')),
    ).toBeUndefined();
  });

  it('fails broker limits at or below maxAttempts and an SQS visibility not above the handler timeout', () => {
    const checks = checkConfigInvariants({
      ...defaults,
      sqsMaxReceiveCount: 5,
      rabbitmqDeliveryLimit: 3,
      sqsVisibilityTimeoutMs: 30_000,
    });
    const failed = checks.filter((c) => c.status === 'fail').map((c) => [c.name, c.fix]);
    expect(failed).toEqual([
      [
        'orders: SQS visibility vs handler timeout',
        expect.stringMatching(/raise the queue's VisibilityTimeout above 30s/),
      ],
      [
        'orders: SQS maxReceiveCount vs maxAttempts',
        expect.stringMatching(/raise the source queue's RedrivePolicy maxReceiveCount to at least 10/),
      ],
      [
        'orders: RabbitMQ x-delivery-limit vs maxAttempts',
        expect.stringMatching(/x-delivery-limit to at least 10/),
      ],
    ]);
  });
});

describe('readConsumerSettings', () => {
  it('reads one consumer or a list, with durations as strings or ms, and flags override the file', () => {
    const one = readConsumerSettings(
      {
        name: 'orders',
        maxAttempts: 8,
        dedupeWindow: '3d',
        handlerTimeoutMs: 10_000,
        sqs: { visibilityTimeout: '45s' },
      },
      {},
      'c.json',
    );
    expect(one).toEqual([
      expect.objectContaining({
        name: 'orders',
        maxAttempts: 8,
        dedupeWindowMs: 3 * 86_400_000,
        handlerTimeoutMs: 10_000,
        sqsVisibilityTimeoutMs: 45_000,
      }),
    ]);
    const list = readConsumerSettings(
      { dedupeWindow: '2d', consumers: [{ name: 'a' }, { name: 'b', dedupeWindow: '1d' }] },
      { 'max-attempts': 3 },
      'c.json',
    );
    expect(list.map((c) => [c.name, c.dedupeWindowMs, c.maxAttempts])).toEqual([
      ['a', 2 * 86_400_000, 3],
      ['b', 86_400_000, 3],
    ]);
  });

  it('rejects bad values with the path to fix', () => {
    expect(() => readConsumerSettings({ maxAttempts: 0 }, {}, 'c.json')).toThrow(
      /c.json: maxAttempts must be a positive whole number/,
    );
    expect(() => readConsumerSettings({ dedupeWindow: 'a week' }, {}, 'c.json')).toThrow(
      /c.json: dedupeWindow must be a duration/,
    );
    expect(() => readConsumerSettings({ mode: 'eager' }, {}, 'c.json')).toThrow(
      /mode must be "transactional" or "leased"/,
    );
    expect(() => readConsumerSettings([1], {}, 'c.json')).toThrow(/must hold a JSON object/);
  });
});
