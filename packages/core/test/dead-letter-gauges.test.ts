// The DLQ gauges on real Postgres: depth and oldest age per consumer from the inbox's live dead letters, the
// depth of broker DLQs given to them, 0 once a consumer's last dead letter is discarded, and a failed read
// logged rather than thrown into the application's metrics collection.

import type { Attributes, BatchObservableCallback, MeterProvider, Observable } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../testing/src/store-conformance.js';
import { PermanentError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { DEAD_LETTER_METRIC_NAMES, observeDeadLetters, PostgresInboxStore } from '../src/postgres/index.js';
import { openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

/** A MeterProvider whose `collect()` runs the batch callbacks and returns what they observed. */
function collectingMeterProvider(): { provider: MeterProvider; collect(): Promise<{ name: string; value: number; attributes: Attributes }[]> } {
  const callbacks = new Set<BatchObservableCallback>();
  const gauge = (name: string) => ({ name, addCallback() {}, removeCallback() {} });
  const meter = {
    createObservableGauge: gauge,
    addBatchObservableCallback: (cb: BatchObservableCallback) => callbacks.add(cb),
    removeBatchObservableCallback: (cb: BatchObservableCallback) => callbacks.delete(cb),
  };
  return {
    provider: { getMeter: () => meter } as unknown as MeterProvider,
    async collect() {
      const seen: { name: string; value: number; attributes: Attributes }[] = [];
      for (const cb of callbacks) {
        await cb({ observe: (o: Observable, value: number, attributes: Attributes = {}) => seen.push({ name: (o as unknown as { name: string }).name, value, attributes }) });
      }
      return seen;
    },
  };
}

describe('DLQ gauges', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('dlq_gauges', 2);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('reports each consumer’s dead letters and the oldest one’s age, broker DLQ depths, and 0 once the last is discarded', async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const c = 'gauged';
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: c,
      store,
      handler: async () => {
        throw new PermanentError('no such account');
      },
    });
    for (const id of ['g-1', 'g-2']) await consumer.handle(testMessage(id));
    await t.pool.query(`UPDATE "${t.schema}".inbox_details SET dead_lettered_at = now() - interval '2 hours' WHERE message_id = 'g-1'`);
    const meters = collectingMeterProvider();
    const gauges = observeDeadLetters(store, {
      meterProvider: meters.provider,
      brokerQueues: [{ name: 'payments.dlq', depth: async () => 7 }, { name: 'broken.dlq', depth: async () => Promise.reject(new Error('no route')) }],
    });
    const first = await meters.collect();
    expect(first).toContainEqual({ name: DEAD_LETTER_METRIC_NAMES.depth, value: 2, attributes: { consumer: c, source: 'inbox' } });
    const age = first.find((m) => m.name === DEAD_LETTER_METRIC_NAMES.oldestAge && m.attributes['consumer'] === c);
    expect(age?.value).toBeGreaterThanOrEqual(7_200);
    expect(age?.value).toBeLessThan(7_200 + 3_600);
    expect(first).toContainEqual({ name: DEAD_LETTER_METRIC_NAMES.depth, value: 7, attributes: { dlq: 'payments.dlq', source: 'broker' } });
    expect(first.filter((m) => m.attributes['dlq'] === 'broken.dlq')).toEqual([]);

    await store.discardDeadLetters({ consumer: c, all: true, requestedBy: 'ops', reason: 'closed accounts', actionId: 'a-1' });
    const second = await meters.collect();
    expect(second).toContainEqual({ name: DEAD_LETTER_METRIC_NAMES.depth, value: 0, attributes: { consumer: c, source: 'inbox' } });
    expect(second).toContainEqual({ name: DEAD_LETTER_METRIC_NAMES.oldestAge, value: 0, attributes: { consumer: c, source: 'inbox' } });
    gauges.stop();
    expect(await meters.collect()).toEqual([]);
  });
});
