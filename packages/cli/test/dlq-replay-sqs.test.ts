// DLQ replay end to end on SQS (ElasticMQ), with a real sqsConsumer and the real Postgres inbox.

import { describeReplaySuite } from './support/replay-suite.js';
import { sqsFixture } from './support/sqs-fixture.js';

describeReplaySuite('SQS', sqsFixture);
