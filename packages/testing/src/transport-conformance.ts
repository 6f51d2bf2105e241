// The transport conformance suite: one set of vitest tests every transport runs against its real broker,
// through a TransportHarness. The transport is under test, not the store: the suite builds real
// idempotentConsumer()s over an InMemoryInboxStore and proves, from their outcomes and from the effects
// their handlers commit, that the transport settles the broker only after the outcome is durable.

import { describe, it } from 'vitest';

import {
  TRANSPORT_CONFORMANCE_CHECKS,
  runTransportConformanceCheck,
} from './transport-conformance-checks.js';
import { resolveConformanceOptions } from './transport-conformance-fixture.js';
import type { TransportConformanceOptions } from './transport-conformance-fixture.js';
import type { TransportFeatures, TransportHarnessFactory } from './transport-harness.js';

export type { TransportConformanceOptions } from './transport-conformance-fixture.js';

/**
 * Declares the transport conformance suite (vitest `describe`/`it`) for one transport. `factory` returns a
 * fresh harness bound to the real broker for every test; `features` declares what the transport
 * guarantees, and the ordering and delay checks run only where declared.
 *
 * The suite proves: a processed message is acked once and never comes back after a restart; a retry is
 * redelivered with the attempt count rising (and the broker's delivery count, where it keeps one), after its
 * delay where the delay is native, then processed; dead letters (permanent error, undecodable body,
 * schema-invalid payload, missing id, max attempts) reach the DLQ with the documented headers and the source
 * is acked; nothing is acked before the outcome is durable (a crash while the handler runs brings the message
 * back, applied once); `stop()` drains in-flight work; the same id published three times is applied once;
 * with `ordering: 'key'`, order per key holds across a retry.
 *
 * @example
 * // packages/kafka/test/kafka-conformance.test.ts
 * describeTransportConformance(
 *   'kafka',
 *   { ordering: 'key', nativeDelay: false, deliveryCount: false },
 *   () => kafkaHarness(),
 *   { quietPeriodMs: 2_000 },
 * );
 */
export function describeTransportConformance(
  name: string,
  features: TransportFeatures,
  factory: TransportHarnessFactory,
  options: TransportConformanceOptions = {},
): void {
  const { testTimeoutMs } = resolveConformanceOptions(options);
  const featureList = `ordering ${features.ordering}, native delay ${features.nativeDelay}, delivery count ${features.deliveryCount}`;
  describe(`transport conformance: ${name} (${featureList})`, () => {
    for (const check of TRANSPORT_CONFORMANCE_CHECKS) {
      if (!check.applies(features)) continue;
      it(check.title, { timeout: testTimeoutMs }, () =>
        runTransportConformanceCheck(check.id, features, factory, options),
      );
    }
  });
}
