// The guard around handle()/handleBatch(): a rejection becomes `rejected` (left to the broker), and a store
// outage is ridden out in process only where the broker counts redeliveries.

import { describe, expect, it } from 'vitest';
import { DeliveryGuard } from '../../src/index.js';
import type { InboundMessage, Outcome } from '../../src/index.js';

const message = (id: string): InboundMessage => ({ id, body: '{}', headers: {}, source: { transport: 'test', destination: 'q' } });
const outage = (id: string): Outcome => ({ status: 'retry', messageId: id, delayMs: 1, attempt: 0, reason: 'store-unavailable' });
const done = (id: string): Outcome => ({ status: 'processed', messageId: id, attempt: 1, durationMs: 1 });

/** A consumer whose store is out for the first `outageCalls` calls of each id. */
function consumer(outageCalls: number) {
  const calls = new Map<string, number>();
  const answer = (m: InboundMessage): Outcome => {
    const n = (calls.get(m.id!) ?? 0) + 1;
    calls.set(m.id!, n);
    return n <= outageCalls ? outage(m.id!) : done(m.id!);
  };
  return {
    calls,
    handle: async (m: InboundMessage) => answer(m),
    handleBatch: async (ms: readonly InboundMessage[]) => ms.map(answer),
  };
}

const sleep = async () => undefined;

describe('DeliveryGuard', () => {
  it('holds a delivery through a store outage when the broker counts redeliveries', async () => {
    const c = consumer(3);
    const guard = new DeliveryGuard({ consumer: c, features: { redeliverSpendsCount: true }, running: () => true, sleep });
    expect(await guard.handle(message('a'))).toMatchObject({ status: 'processed' });
    expect(c.calls.get('a')).toBe(4);
    expect(await guard.handleBatch([message('b'), message('c')])).toMatchObject([{ status: 'processed' }, { status: 'processed' }]);
  });

  it('hands the outage back as a retry when redelivering costs the broker nothing', async () => {
    const c = consumer(3);
    const guard = new DeliveryGuard({ consumer: c, features: {}, running: () => true, sleep });
    expect(await guard.handle(message('a'))).toMatchObject({ status: 'retry', reason: 'store-unavailable' });
    expect(c.calls.get('a')).toBe(1);
  });

  it('stops holding once the transport stops: the retry goes back', async () => {
    let running = true;
    const c = consumer(100);
    const guard = new DeliveryGuard({
      consumer: c,
      features: { redeliverSpendsCount: true },
      running: () => running,
      sleep: async () => {
        if (c.calls.get('a') === 2) running = false;
      },
    });
    expect(await guard.handle(message('a'))).toMatchObject({ status: 'retry', reason: 'store-unavailable' });
  });

  it('turns a rejecting handle() or handleBatch() into `rejected`, never a rejection', async () => {
    const error = new Error('bug');
    const broken = { handle: () => Promise.reject(error), handleBatch: () => Promise.reject(error) };
    const guard = new DeliveryGuard({ consumer: broken, features: {}, running: () => true, sleep });
    expect(await guard.handle(message('a'))).toEqual({ status: 'rejected', error });
    expect(await guard.handleBatch([message('a'), message('b')])).toEqual([{ status: 'rejected', error }, { status: 'rejected', error }]);
  });
});
