// A conformance suite that cannot fail proves nothing: each check runs against a transport broken in one
// classic way and must reject; the same transport without the fault passes every check.

import { describe, expect, it } from 'vitest';

import {
  LEARNING_TRANSPORT_FEATURES,
  TRANSPORT_CONFORMANCE_CHECKS,
  runTransportConformanceCheck,
} from '../src/index.js';
import type { TransportConformanceCheckId } from '../src/index.js';
import { faultyHarness } from './support/faulty-transport.js';
import type { Fault } from './support/faulty-transport.js';

const features = LEARNING_TRANSPORT_FEATURES;
const options = { waitTimeoutMs: 1_500, quietPeriodMs: 250 };

function check(id: TransportConformanceCheckId, fault: Fault): Promise<void> {
  return runTransportConformanceCheck(id, features, async () => faultyHarness(fault), options);
}

describe('the transport conformance suite', () => {
  it('passes the faulty transport with no fault on every check', async () => {
    for (const c of TRANSPORT_CONFORMANCE_CHECKS) await check(c.id, 'none');
  });

  it('fails a transport that acks on receipt (autoAck): the message does not come back after a crash', async () => {
    await expect(check('durable-before-ack', 'ack-on-receipt')).rejects.toThrow(
      /did not come back after a crash/,
    );
  });

  it('fails a transport that never acks processed messages: they come back after a restart', async () => {
    await expect(check('acks-once', 'never-ack')).rejects.toThrow(
      /settled messages came back after a restart/,
    );
  });

  it('fails a transport that redelivers a retry without its delay', async () => {
    // Redelivered at once, the message burns its delivery count while core still refuses it.
    await expect(check('retry', 'retry-without-delay')).rejects.toThrow(/no processed outcome/);
  });

  it('fails a transport that writes dead letters without the documented headers', async () => {
    await expect(check('dead-letter', 'dead-letter-without-headers')).rejects.toThrow(/dead letters/);
  });

  it('fails a transport that acks dead letters without publishing them', async () => {
    await expect(check('dead-letter', 'ack-dead-letters')).rejects.toThrow(/dead letters: \[\]/);
    await expect(check('max-attempts', 'ack-dead-letters')).rejects.toThrow(/no dead letter/);
  });

  it('fails a transport whose stop() abandons in-flight work', async () => {
    await expect(check('stop-drains', 'stop-abandons')).rejects.toThrow(
      /'stop resolved', 'handler finished'/,
    );
  });

  it('fails a transport that uses the broker copy id as the message id: duplicates are applied again', async () => {
    await expect(check('duplicates', 'broker-id-as-message-id')).rejects.toThrow(/expected 3 outcomes/);
  });

  it('fails a transport that re-publishes retries at the back of the queue: key order is lost', async () => {
    await expect(check('ordering', 'requeue-retries-at-back')).rejects.toThrow(/deeply equal/);
  });

  it('fails a transport whose dead-letter verb reports a too-large copy as an outage: the message loops, no dead letter', async () => {
    await expect(check('oversized-dead-letter', 'oversize-dead-letter-as-outage')).rejects.toThrow(
      /dead letters: \[\]/,
    );
  });

  it('fails a transport that hands a store outage back to a broker that counts redeliveries', async () => {
    await expect(check('store-outage', 'outage-redelivers')).rejects.toThrow(
      /store-unavailable|delivery count rose|delivered the message/,
    );
  });

  it('fails a transport that charges every fetched delivery instead of only those that run', async () => {
    await expect(check('crash-charges-running', 'charge-on-fetch')).rejects.toThrow(
      /a crash charged messages that were not running/,
    );
  });
});
