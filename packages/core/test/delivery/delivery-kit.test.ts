// The delivery kit assembled once: a suspect is charged before it runs, every outcome reaches the port through
// settle() with the transport's context, and a retry whose handler did not run is not charged again.

import { describe, expect, it } from 'vitest';
import { DeliveryKit, silentLogger, withAttemptLedger } from '../../src/index.js';
import type { BrokerSettlement, InboundMessage, Logger, Outcome } from '../../src/index.js';

interface D {
  readonly inbound: InboundMessage;
  readonly redelivered: boolean;
}
const d = (id: string, redelivered: boolean): D => ({
  redelivered,
  inbound: { id, body: '{}', headers: {}, source: { transport: 'test', destination: 'q' } },
});

function kit(outcome: (m: InboundMessage) => Outcome) {
  const events: string[] = [];
  const warnings: unknown[] = [];
  const consumer = withAttemptLedger(
    {
      handle: async (m: InboundMessage) => (events.push(`handle ${m.id}`), outcome(m)),
      handleBatch: async (ms: readonly InboundMessage[]) => (
        events.push(`batch ${ms.map((m) => m.id).join(',')}`),
        ms.map(outcome)
      ),
    },
    {
      recordAttemptsStarted: async (ms: readonly InboundMessage[]) =>
        void events.push(`charge ${ms.map((m) => m.id).join(',')}`),
      crashSuspects: async () => new Map<string, number>(),
    },
  );
  const port: BrokerSettlement<D> = {
    ack: (x) => void events.push(`ack ${x.inbound.id}`),
    redeliver: async (x, delayMs) => (
      events.push(`redeliver ${x.inbound.id} ${delayMs}`),
      { status: 'sent' }
    ),
    deadLetter: async (x, form) => (
      events.push(`dead-letter ${x.inbound.id} ${form}`),
      { status: 'failed', error: new Error('down') }
    ),
    leave: (x) => void events.push(`leave ${x.inbound.id}`),
  };
  const logger: Logger = {
    ...silentLogger,
    error: (obj: object) => void warnings.push(obj),
    warn: (obj: object) => void warnings.push(obj),
  };
  const k = new DeliveryKit<D>({
    consumer,
    port,
    features: { redeliverSpendsCount: false },
    running: () => true,
    sleep: async () => undefined,
    message: (x) => x.inbound,
    mayHaveCrashed: (x) => x.redelivered,
    logger,
    what: 'test',
    context: { queue: 'q' },
    deliveryContext: (x) => ({ messageId: x.inbound.id }),
  });
  return { k, events, warnings };
}

describe('DeliveryKit', () => {
  it('charges a suspect before it runs, a fresh delivery never, and settles each outcome through the port', async () => {
    const { k, events } = kit((m) => ({ status: 'processed', messageId: m.id!, attempt: 1, durationMs: 1 }));
    const again = d('again', true);
    await k.settle(again, await k.handle(again));
    const fresh = [d('a', false), d('b', false)];
    const outcomes = await k.handleBatch(fresh);
    await Promise.all(fresh.map((x, i) => k.settle(x, outcomes[i]!)));
    expect(events).toEqual(['charge again', 'handle again', 'ack again', 'batch a,b', 'ack a', 'ack b']);
  });

  it("logs a settlement with the transport's context and the delivery's", async () => {
    const { k, warnings } = kit((m) => ({
      status: 'dead-letter',
      messageId: m.id!,
      reason: 'permanent-error',
      attempts: 1,
      error: { name: 'Error', message: 'bad' },
    }));
    const x = d('x', false);
    await k.settle(x, await k.handle(x));
    expect(warnings).toContainEqual(expect.objectContaining({ queue: 'q', messageId: 'x' }));
  });

  it('does not charge again a redelivery whose earlier outcome was a retry that ran no handler', async () => {
    const { k, events } = kit(
      (m) =>
        ({ status: 'retry', messageId: m.id!, reason: 'lock-timeout', attempt: 0, delayMs: 5 }),
    );
    const first = d('w', true);
    await k.settle(first, await k.handle(first));
    events.length = 0;
    const second = d('w', true);
    await k.handle(second);
    expect(events).toEqual(['handle w']);
  });
});
