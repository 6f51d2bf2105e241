// DLQ replay end to end on Kafka, with a real kafkaConsumer and the real Postgres inbox.

import { describeReplaySuite } from './support/replay-suite.js';
import { kafkaFixture } from './support/kafka-fixture.js';

describeReplaySuite('Kafka', kafkaFixture);
