// The relay's metrics: backlog and oldest-age gauges read from the table, publish failures and published rows
// counted, parked rows counted.

import type { Attributes, Meter, MeterProvider, ObservableGauge, ObservableResult } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue, OUTBOX_METRIC_NAMES, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, recordingPublisher, waitFor, type OutboxTestDb } from './support.js';

type Callback = (result: ObservableResult) => void | Promise<void>;

/** Sums counters; collects gauges on demand by running their callbacks. */
function recordingMeterProvider() {
  const sums = new Map<string, number>();
  const gauges = new Map<string, Callback[]>();
  const meter = {
    createCounter: (name: string) => ({ add: (v: number) => sums.set(name, (sums.get(name) ?? 0) + v) }),
    createObservableGauge: (name: string) => {
      const callbacks: Callback[] = [];
      gauges.set(name, callbacks);
      const gauge = {
        addCallback: (cb: Callback) => void callbacks.push(cb),
        removeCallback: (cb: Callback) => void callbacks.splice(callbacks.indexOf(cb), 1),
      };
      return gauge as unknown as ObservableGauge;
    },
  } as unknown as Meter;
  const provider: MeterProvider = { getMeter: () => meter };
  return {
    provider,
    sum: (name: string) => sums.get(name) ?? 0,
    async observe(name: string): Promise<number | undefined> {
      let value: number | undefined;
      const result = { observe: (v: number, _a?: Attributes) => void (value = v) } as ObservableResult;
      for (const cb of gauges.get(name) ?? []) await cb(result);
      return value;
    },
  };
}

describe('outbox relay metrics', () => {
  let t: OutboxTestDb;
  beforeAll(async () => {
    t = await openOutboxDb('outbox_metrics');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('reports backlog, oldest age and failures while the broker is down, and published rows after', async () => {
    const schema = t.schema.schema;
    const metrics = recordingMeterProvider();
    const publisher = recordingPublisher();
    publisher.failing = true;
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < 10; i++) await enqueue(tx, { destination: 'm', body: String(i) }, { schema });
    });
    const relay = startOutboxRelay({
      db: t.db,
      publishers: { default: publisher },
      schema,
      pollIntervalMs: 10,
      backoff: { initialDelayMs: 5, maxDelayMs: 20 },
      meterProvider: metrics.provider,
    });
    await waitFor(() => metrics.sum(OUTBOX_METRIC_NAMES.publishFailures) >= 10);
    expect(await metrics.observe(OUTBOX_METRIC_NAMES.backlog)).toBe(10);
    expect(await metrics.observe(OUTBOX_METRIC_NAMES.oldestAge)).toBeGreaterThan(0);
    publisher.failing = false;
    await waitFor(() => metrics.sum(OUTBOX_METRIC_NAMES.published) >= 10);
    expect(await metrics.observe(OUTBOX_METRIC_NAMES.backlog)).toBe(0);
    expect(metrics.sum(OUTBOX_METRIC_NAMES.parked)).toBe(0);
    await relay.stop();
    expect(await metrics.observe(OUTBOX_METRIC_NAMES.backlog)).toBeUndefined();
  });
});
