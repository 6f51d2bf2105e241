// Batch mode, several poison records in a chunk: their dead letters are gathered into one confirmed produce
// (one request for the chunk, not one round trip each), and every record still gets its own dead letter,
// exactly once, with its reason; one that is too large for the DLQ topic in full still goes out compact, alone.
// Against the real broker, counting the DLQ producer's requests.

import { HEADERS, idempotentConsumer, PermanentError } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import type { Producer } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { kafkaHarness, testKafka, topicSize } from './kafka-harness.js';
import type { KafkaHarness } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';

let releaseBroker: (() => void) | undefined;
let h: KafkaHarness | undefined;
let producer: Producer | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
});

afterAll(async () => {
  await h?.dispose();
  await producer?.disconnect();
  releaseBroker?.();
});

/** `producer` whose `sendBatch` calls are recorded: how many records each carried. */
function counted(target: Producer, sends: number[]): Producer {
  return new Proxy(target, {
    get(p, name) {
      const value: unknown = Reflect.get(p, name);
      if (typeof value !== 'function') return value;
      if (name !== 'sendBatch') return (value as (...a: unknown[]) => unknown).bind(p);
      return (batch: Parameters<Producer['sendBatch']>[0]) => {
        sends.push((batch.topicMessages ?? []).reduce((n, t) => n + t.messages.length, 0));
        return p.sendBatch(batch);
      };
    },
  });
}

async function committedOffset(h: KafkaHarness): Promise<number> {
  const admin = h.kafka.admin();
  await admin.connect();
  try {
    const [topic] = await admin.fetchOffsets({ groupId: h.groupId, topics: [h.topic] });
    return Number(topic?.partitions[0]?.offset ?? -1);
  } finally {
    await admin.disconnect();
  }
}

it('sends a chunk of poison records to the DLQ in one produce, each dead letter once with its reason; an oversized one still goes compact', async () => {
  const sends: number[] = [];
  producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  h = await kafkaHarness({
    partitions: 1,
    transport: { mode: 'batch', batchSize: 100, kafka: undefined, producer: counted(producer, sends) },
  });
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, unknown>({
    name: uniqueName('kafka-dlq-coalesce'),
    store: new InMemoryInboxStore(),
    handler: async (message) => {
      const { kind, n } = message.payload as { kind: string; n: number };
      if (kind === 'poison') throw new PermanentError(`poison ${n}`);
      if (kind === 'oversized') throw new PermanentError(`refused: ${'why '.repeat(500)}`);
    },
    hooks: { onOutcome: recorder.hook },
  });
  // 12 poison records (the 7th oversized: its full dead letter is over the DLQ topic's 64 KiB), then a good
  // one. The first runs alone (just after the join); the rest in chunks of 2, 4 and 8.
  const poison = Array.from({ length: 12 }, (_, n) => ({ id: uniqueName(`poison-${n}`), n }));
  const big = poison[6]!;
  const good = uniqueName('good');
  await h.publish([
    ...poison.map(({ id, n }) =>
      id === big.id
        ? { ...h!.oversizedDeadLetter!(id), body: JSON.stringify({ kind: 'oversized', n }) }
        : { id, body: JSON.stringify({ kind: 'poison', n }) },
    ),
    { id: good, body: JSON.stringify({ kind: 'ok', n: 12 }) },
  ]);
  await h.startConsumer(consumer);
  await recorder.waitFor(good, 'processed', { timeoutMs: 60_000 });
  // Everything committed: nothing left to be fetched (and dead-lettered) again.
  const deadline = Date.now() + 60_000;
  while ((await committedOffset(h)) < poison.length + 1 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  expect(await committedOffset(h)).toBe(poison.length + 1);

  const letters = await h.readDeadLetters(poison.length, 30_000);
  expect(letters.map((l) => l.id).sort()).toEqual(poison.map((p) => p.id).sort());
  expect(await topicSize(h.kafka, h.deadLetterTopic)).toBe(poison.length);
  for (const { id, n } of poison) {
    const headers = letters.find((l) => l.id === id)!.headers;
    expect(headers[HEADERS.reason]).toBe('permanent-error');
    expect(recorder.count('dead-letter', id)).toBe(1);
    if (id === big.id) {
      // Compact: no stack, clipped message, but the original headers still there (not the minimal form).
      expect(headers[HEADERS.dropped]).toContain('error-stack');
      expect(headers[HEADERS.dropped]).not.toContain('original-headers');
      expect(headers['x-bulk']).toBeDefined();
    } else {
      expect(headers[HEADERS.errorMessage]).toBe(`poison ${n}`);
    }
  }
  // Coalesced: fewer requests than dead letters, some carrying several (one request per dead letter before).
  expect(Math.max(...sends), `records per DLQ request: ${sends.join(',')}`).toBeGreaterThan(1);
  expect(sends.length, `records per DLQ request: ${sends.join(',')}`).toBeLessThan(poison.length);
}, 120_000);
