// The transport conformance suite against the real NATS server (JetStream, file storage): a native delay
// (nak(delay)), no delivery count passed to core (JetStream's counts deliveries, not attempts), and no ordering
// promise in the default mode; with `orderedBySubject` the order per subject (the harness's key) holds across a
// retry.

import { describeTransportConformance } from '@inboxkit/testing';

import { NATS_FEATURES } from '../src/index.js';
import { natsHarness } from './nats-harness.js';

describeTransportConformance('nats', NATS_FEATURES, () => natsHarness(), {
  // Above the harness's 2 s ack wait, so an unsettled message has time to come back.
  quietPeriodMs: 3_000,
});

describeTransportConformance(
  'nats, ordered by subject',
  // A retry waits in the process (not nak): no native delay in this mode.
  { ...NATS_FEATURES, ordering: 'key', nativeDelay: false },
  () => natsHarness({ consumer: { orderedBySubject: true } }),
  { quietPeriodMs: 3_000 },
);
