// platformaticKafka() refuses what it cannot work with. What the publisher, the dead-letter reader and the
// transport do on @platformatic/kafka is tested with kafkajs' in the parametrised files (kafka-publisher,
// kafka-dead-letter-queue, kafka-consumer, kafka-conformance, kafka-crash).
import { uniqueName } from '@inboxkit/testing';
import * as platformatic from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';

import { platformaticKafka } from '../src/index.js';
import { testPlatformaticKafka } from './kafka-harness.js';

describe('platformaticKafka', () => {
  it('refuses a missing module, client id or broker list, and a run() with autoCommit, with a TypeError saying what to pass', async () => {
    expect(() => platformaticKafka({} as never, { clientId: 'x', bootstrapBrokers: ['b:9092'] })).toThrow(
      /pass the @platformatic\/kafka module/,
    );
    expect(() => platformaticKafka(platformatic, { clientId: '', bootstrapBrokers: ['b:9092'] })).toThrow(
      TypeError,
    );
    expect(() => platformaticKafka(platformatic, { clientId: 'x', bootstrapBrokers: [] })).toThrow(
      /bootstrapBrokers/,
    );
    const consumer = testPlatformaticKafka().consumer({ groupId: uniqueName('plt-refuse') });
    await expect(consumer.run({ autoCommit: true, eachBatch: async () => undefined })).rejects.toThrow(
      TypeError,
    );
    await consumer.disconnect();
  });
});
