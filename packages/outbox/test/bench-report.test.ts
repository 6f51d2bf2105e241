// The outbox bench's report is read by the bench runner (bench/parse-output.ts): every ratio with its target,
// and every table row with msg/s, p50 and p99.

import { describe, expect, it } from 'vitest';
import { rateRows, ratioLines } from '../../../bench/parse-output.js';
import { formatBenchReport } from '../bench/bench-report.js';

describe('outbox bench report', () => {
  it('parses with rateRows and ratioLines', () => {
    const output = formatBenchReport({
      messages: 1500,
      handlers: 16,
      batchSize: 500,
      target: 0.7,
      brokers: ['kafka', 'rabbitmq'],
      results: {
        kafka: { direct: { perSecond: 1242.4, p50: 1.3, p99: 37.7 }, outbox: { perSecond: 841, p50: 2.8, p99: 13.3 }, quiet: { perSecond: 1000, p50: 30, p99: 60.5 }, latencyRate: 120, drain: { perSecond: 12273 } },
        rabbitmq: { direct: { perSecond: 1137, p50: 2, p99: 10.6 }, outbox: { perSecond: 500, p50: 12.1, p99: 144.2 }, quiet: { perSecond: 1137, p50: 30, p99: 60.5 }, latencyRate: 250, drain: { perSecond: 10258 } },
      },
    });
    expect(ratioLines(output)).toEqual([
      { label: 'kafka: ratio relay/direct', value: 0.68, target: 0.7 },
      { label: 'kafka: ratio relay without NOTIFY/direct', value: 0.8 },
      { label: 'rabbitmq: ratio relay/direct', value: 0.44, target: 0.7 },
      { label: 'rabbitmq: ratio relay without NOTIFY/direct', value: 1 },
    ]);
    expect(rateRows(output)).toEqual([
      { label: 'kafka direct (publish in the handler)', perSecond: 1242, p50: 1.3, p99: 37.7 },
      { label: 'kafka outbox (enqueue + relay)', perSecond: 841, p50: 2.8, p99: 13.3 },
      { label: 'kafka outbox, notify off (relay polls 50 ms)', perSecond: 1000, p50: 30, p99: 60.5 },
      { label: 'kafka relay drain (backlog)', perSecond: 12273 },
      { label: 'rabbitmq direct (publish in the handler)', perSecond: 1137, p50: 2, p99: 10.6 },
      { label: 'rabbitmq outbox (enqueue + relay)', perSecond: 500, p50: 12.1, p99: 144.2 },
      { label: 'rabbitmq outbox, notify off (relay polls 50 ms)', perSecond: 1137, p50: 30, p99: 60.5 },
      { label: 'rabbitmq relay drain (backlog)', perSecond: 10258 },
    ]);
  });
});
