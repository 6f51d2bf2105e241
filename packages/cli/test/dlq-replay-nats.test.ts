// DLQ replay end to end on NATS JetStream, with a real natsConsumer and the real Postgres inbox.

import { natsFixture } from './support/nats-fixture.js';
import { describeReplaySuite } from './support/replay-suite.js';

describeReplaySuite('NATS', natsFixture);
