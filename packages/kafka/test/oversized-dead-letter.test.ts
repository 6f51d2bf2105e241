// Hardening issue, item 3, on Kafka: a record whose headers fit its topic but not the DLQ topic once the
// dead-letter headers are added (a long id is copied into `message-id` and `x-inboxkit-original-id`). Its
// smallest form used to still carry the id twice, so the broker refused every form, the partition's offsets
// were never committed and the records behind it never ran. Now the minimal form (core's) carries the id once,
// clipped, and says so. Through the consumer, against the real broker.

import { ConfigResourceTypes } from 'kafkajs';
import { HEADERS, idempotentConsumer, MINIMAL_ID_LENGTH } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { kafkaHarness } from './kafka-harness.js';
import type { KafkaHarness } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let releaseBroker: (() => void) | undefined;
let h: KafkaHarness | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});

afterAll(async () => {
  await h?.dispose();
  releaseBroker?.();
});

it('dead-letters a record whose long id overflows the DLQ topic in every form but the minimal one; the records behind it run', async () => {
  h = await kafkaHarness({ partitions: 1 });
  const admin = h.kafka.admin();
  await admin.connect();
  await admin.alterConfigs({
    validateOnly: false,
    resources: [
      {
        type: ConfigResourceTypes.TOPIC,
        name: h.deadLetterTopic,
        configEntries: [{ name: 'max.message.bytes', value: '8192' }],
      },
    ],
  });
  await admin.disconnect();
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, unknown>({
    name: uniqueName('kafka-oversized'),
    store: new InMemoryInboxStore(),
    handler: async () => undefined,
    hooks: { onOutcome: recorder.hook },
  });
  await h.startConsumer(consumer);
  // 6,000 characters: over maxMessageIdLength (dead-lettered as invalid-id), and three copies of it (the
  // original header, message-id, original-id) or even two overflow the DLQ topic's 8 KiB.
  const id = `${uniqueName('long')}-${'i'.repeat(6_000)}`;
  const after = [uniqueName('after'), uniqueName('after')];
  await h.publish([{ id, body: '{}' }, ...after.map((a) => ({ id: a, body: '{}' }))]);
  for (const a of after) await recorder.waitFor(a, 'processed', { timeoutMs: 30_000 });
  const letters = await h.readDeadLetters(1, 30_000);
  expect(letters).toHaveLength(1);
  const headers = letters[0]!.headers;
  expect(headers[HEADERS.reason]).toBe('invalid-id');
  expect(headers[HEADERS.messageId]).toHaveLength(MINIMAL_ID_LENGTH);
  expect(id.startsWith(headers[HEADERS.messageId]!.slice(0, 3_000))).toBe(true);
  expect(headers[HEADERS.dropped]).toContain('message-id-clipped');
  // Dead-lettered once: the partition moved on instead of retrying the produce.
  expect(recorder.count('dead-letter', id)).toBe(1);
}, 90_000);
