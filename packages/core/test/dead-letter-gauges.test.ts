// The DLQ gauges on real Postgres: depth and oldest age per consumer from the inbox's live dead letters, the
// depth of broker DLQs given to them, 0 once a consumer's last dead letter is discarded, and a failed read
// logged rather than thrown into the application's metrics collection. One reading serves the collections of
// `cacheMs` (counted in statements sent to Postgres and broker depth reads), then the next collection reads again.

import type { Attributes, BatchObservableCallback, MeterProvider, Observable } from '@opentelemetry/api';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../testing/src/store-conformance.js';
import { PermanentError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { DEAD_LETTER_METRIC_NAMES, observeDeadLetters, PostgresInboxStore } from '../src/postgres/index.js';
import { ConfigurationError } from '../src/errors.js';
import { openTestDatabase, recordingPool, type TestDatabase, type TestDB, type TestTx } from './support/postgres.js';

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

/** Dead-letters `ids` through a consumer `name` on `store` whose handler refuses everything. */
async function deadLetter(store: PostgresInboxStore<TestDB>, name: string, ids: readonly string[]): Promise<void> {
  const consumer = idempotentConsumer<unknown, TestTx>({
    name,
    store,
    handler: async () => {
      throw new PermanentError('no such account');
    },
  });
  for (const id of ids) expect(await consumer.handle(testMessage(id))).toMatchObject({ status: 'dead-letter' });
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
    await deadLetter(store, c, ['g-1', 'g-2']);
    await t.pool.query(`UPDATE "${t.schema}".inbox_details SET dead_lettered_at = now() - interval '2 hours' WHERE message_id = 'g-1'`);
    const meters = collectingMeterProvider();
    const gauges = observeDeadLetters(store, {
      meterProvider: meters.provider,
      cacheMs: 0,
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

  it('reads the inbox and the broker depths once per cacheMs (default 30 s), however often it is collected, then again', async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-dlq-gauges');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const store = new PostgresInboxStore({ db, schema: t.schema });
      const c = 'scraped';
      await deadLetter(store, c, ['s-1']);
      await t.pool.query(`UPDATE "${t.schema}".inbox_details SET dead_lettered_at = now() - interval '1 hour' WHERE consumer = $1`, [c]);
      let brokerReads = 0;
      const brokerQueues = [{ name: 'scraped.dlq', depth: async () => ++brokerReads }];
      const meters = collectingMeterProvider();
      // What reached Postgres (the seam's lookup of a pooled connection is marked and sends nothing).
      const statements = () => sent.filter((s) => !s.startsWith('/* inboxkit: connection lookup')).length;
      const gauges = observeDeadLetters(store, { meterProvider: meters.provider, consumer: c, brokerQueues });
      sent.length = 0;
      // Six scrapes, three of them at once (several exporters, or replicas' scrapes landing together).
      const first = await meters.collect();
      await Promise.all([meters.collect(), meters.collect(), meters.collect()]);
      await meters.collect();
      const last = await meters.collect();
      expect(statements()).toBe(2); // one reading: the dead letters' ages and the database clock
      expect(brokerReads).toBe(1);
      for (const seen of [first, last]) {
        expect(seen).toContainEqual({ name: DEAD_LETTER_METRIC_NAMES.depth, value: 1, attributes: { consumer: c, source: 'inbox' } });
        expect(seen).toContainEqual({ name: DEAD_LETTER_METRIC_NAMES.depth, value: 1, attributes: { dlq: 'scraped.dlq', source: 'broker' } });
      }
      const age = (seen: typeof first) => seen.find((m) => m.name === DEAD_LETTER_METRIC_NAMES.oldestAge)!.value;
      expect(age(first)).toBeGreaterThanOrEqual(3_600);
      // A kept reading's age moves on with the clock rather than standing still.
      expect(age(last)).toBeGreaterThanOrEqual(age(first));
      gauges.stop();

      // A short cacheMs: a later collection reads again (awaited, not slept for).
      const short = observeDeadLetters(store, { meterProvider: meters.provider, consumer: c, brokerQueues, cacheMs: 50 });
      sent.length = 0;
      await meters.collect();
      expect(statements()).toBe(2);
      const deadline = Date.now() + 30_000;
      while (statements() === 2 && Date.now() < deadline) await meters.collect();
      expect(statements()).toBe(4);
      short.stop();

      expect(() => observeDeadLetters(store, { cacheMs: -1 })).toThrow(ConfigurationError);
      expect(() => observeDeadLetters(store, { cacheMs: Number.NaN })).toThrow(/cacheMs must be a non-negative number/);
    } finally {
      await db.destroy();
    }
  });
});
