// DLQ replay end to end on Kafka, with a real kafkaConsumer and the real Postgres inbox, the CLI on each Kafka
// client library (--kafka-client kafkajs | platformatic).

import { KAFKA_CLIENTS } from '../src/settings/connection-settings.js';
import { describeReplaySuite } from './support/replay-suite.js';
import { kafkaFixture } from './support/kafka-fixture.js';

for (const client of KAFKA_CLIENTS)
  describeReplaySuite(`Kafka (CLI on ${client})`, () => kafkaFixture(client));
