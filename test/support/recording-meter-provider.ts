// A MeterProvider for tests that read metrics: it sums counters by name and exact attribute set, and ignores
// histograms. Shared by the consumer's and the HTTP middleware's fast-path tests.

import type { Attributes, Counter, Histogram, Meter, MeterProvider } from '@opentelemetry/api';

/** A MeterProvider that sums counters by name and exact attribute set; `value` reads one sum (0 if none). */
export function recordingMeterProvider(): {
  provider: MeterProvider;
  value(name: string, attributes: Attributes): number;
} {
  const sums = new Map<string, number>();
  const key = (name: string, attributes: Attributes = {}): string =>
    `${name} ${JSON.stringify(Object.entries(attributes).sort())}`;
  const instrument = (name: string) => ({
    add: (v: number, a?: Attributes) => sums.set(key(name, a), (sums.get(key(name, a)) ?? 0) + v),
    record: () => undefined,
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
