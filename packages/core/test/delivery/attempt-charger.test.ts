// The attempt charger: who is a crash suspect, and which deliveries are charged a started attempt before they
// run (once per id in hand, never for one returned unrun from here).

import { describe, expect, it } from 'vitest';
import { AttemptCharger, ConfigurationError, silentLogger, withAttemptLedger } from '../../src/index.js';
import type { InboundMessage } from '../../src/index.js';

interface D {
  readonly inbound: InboundMessage;
  readonly redelivered: boolean;
}
const d = (id: string, redelivered: boolean): D => ({
  redelivered,
  inbound: { id, body: '{}', headers: {}, source: { transport: 'test', destination: 'q' } },
});

function charger(options: { retriesLookRedelivered?: boolean; suspects?: Record<string, number> } = {}) {
  const recorded: string[][] = [];
  const consumer = withAttemptLedger({}, {
    recordAttemptsStarted: async (ms: readonly InboundMessage[]) => void recorded.push(ms.map((m) => m.id!)),
    crashSuspects: async () => new Map(Object.entries(options.suspects ?? {})),
  });
  const c = new AttemptCharger<D>({
    consumer,
    message: (x) => x.inbound,
    mayHaveCrashed: (x) => x.redelivered,
    ...(options.retriesLookRedelivered !== undefined
      ? { retriesLookRedelivered: options.retriesLookRedelivered }
      : {}),
    logger: silentLogger,
    what: 'test',
  });
  return { c, recorded };
}

describe('AttemptCharger', () => {
  it('charges a redelivery before it runs, and a first delivery never', async () => {
    const { c, recorded } = charger();
    const release = await c.start([d('fresh', false), d('again', true)]);
    release();
    expect(recorded).toEqual([['again']]);
  });

  it('charges one attempt per id in hand, not one per copy', async () => {
    const { c, recorded } = charger();
    const first = await c.start([d('x', true)]);
    const second = await c.start([d('x', true)]);
    first();
    second();
    expect(recorded).toEqual([['x']]);
  });

  it('charges nothing for a delivery returned unrun from here, nor after a retry whose handler did not run', async () => {
    const { c, recorded } = charger();
    c.returned([d('back', true)]);
    expect(c.maySuspect(d('back', true))).toBe(false);
    (await c.start([d('back', true)]))();
    c.settled(d('waited', true), {
      status: 'retry',
      messageId: 'waited',
      delayMs: 1,
      attempt: 0,
      reason: 'lock-timeout',
    });
    (await c.start([d('waited', true)]))();
    expect(recorded).toEqual([]);
    // Remembered once: the next redelivery of the same id may have crashed again.
    (await c.start([d('back', true)]))();
    expect(recorded).toEqual([['back']]);
  });

  it('makes every redelivery a suspect without a read, unless retries look redelivered', async () => {
    const plain = charger();
    const a = d('a', true);
    expect([...(await plain.c.suspects([a, d('b', false)]))]).toEqual([[a, 0]]);
    const read = charger({ retriesLookRedelivered: true, suspects: { crashed: 3 } });
    const crashed = d('crashed', true);
    expect([...(await read.c.suspects([crashed, d('retried', true), d('fresh', false)]))]).toEqual([
      [crashed, 3],
    ]);
  });

  it('suspects every redelivery when the inbox cannot be read', async () => {
    const c = new AttemptCharger<D>({
      consumer: withAttemptLedger({}, {
        recordAttemptsStarted: async () => undefined,
        crashSuspects: () => Promise.reject(new Error('down')),
      }),
      message: (x) => x.inbound,
      mayHaveCrashed: (x) => x.redelivered,
      retriesLookRedelivered: true,
      logger: silentLogger,
      what: 'test',
    });
    const a = d('a', true);
    expect([...(await c.suspects([a]))]).toEqual([[a, 0]]);
  });
});

describe('AttemptCharger.charged', () => {
  it('charges before the run and releases the ids after it, also when the run rejects', async () => {
    const { c, recorded } = charger();
    const order: string[] = [];
    const result = await c.charged([d('a', true)], async () => {
      order.push(`run after ${recorded.length} record(s)`);
      return 'outcome';
    });
    expect(result).toBe('outcome');
    expect(order).toEqual(['run after 1 record(s)']);
    await expect(c.charged([d('b', true)], () => Promise.reject(new Error('bug')))).rejects.toThrow('bug');
    // Released: the next copy of 'b' is charged again (it is no longer in hand).
    (await c.start([d('b', true)]))();
    expect(recorded).toEqual([['a'], ['b'], ['b']]);
  });

  it('rejects a consumer that carries no attempt ledger, naming the way to forward one', () => {
    const options = { message: (x: D) => x.inbound, mayHaveCrashed: () => true, logger: silentLogger, what: 'test' };
    // A wrapper written as a plain object (or a spread) of an idempotent consumer loses its ledger.
    expect(() => new AttemptCharger<D>({ ...options, consumer: { handle: async () => undefined } })).toThrow(
      ConfigurationError,
    );
    expect(() => new AttemptCharger<D>({ ...options, consumer: {} })).toThrow(/withAttemptLedger/);
  });
});
