// A MeterProvider for tests that read metrics: it sums counters by name and exact attribute set, and counts
// histogram records. Shared by the consumer's observability and fast-path tests and the HTTP middleware's.

import type { Attributes, Counter, Histogram, Meter, MeterProvider } from '@opentelemetry/api';

/**
 * A MeterProvider that sums counters (and counts histogram records) by name and exact attribute set; `value`
 * reads one sum (0 if none; no attributes means the empty set).
 */
export function recordingMeterProvider(): {
  provider: MeterProvider;
  value(name: string, attributes?: Attributes): number;
} {
  const sums = new Map<string, number>();
  const key = (name: string, attributes: Attributes = {}): string =>
    `${name} ${JSON.stringify(Object.entries(attributes).sort())}`;
  const instrument = (name: string) => ({
    add: (v: number, a?: Attributes) => sums.set(key(name, a), (sums.get(key(name, a)) ?? 0) + v),
    // A histogram counts its records (of a non-negative value), so a test can see that a duration was taken.
    record: (v: number, a?: Attributes) =>
      sums.set(key(name, a), (sums.get(key(name, a)) ?? 0) + (v >= 0 ? 1 : 0)),
  });
  const meter = {
    createCounter: (name: string) => instrument(name) as unknown as Counter,
    createHistogram: (name: string) => instrument(name) as unknown as Histogram,
  } as unknown as Meter;
  return {
    provider: { getMeter: () => meter },
    value: (name, attributes) => sums.get(key(name, attributes)) ?? 0,
  };
}
