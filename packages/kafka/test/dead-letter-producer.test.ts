// The dead-letter producer against the real broker.
//
// Issue 22, item 8: a dead letter must fit the DLQ topic's max.message.bytes, or the broker refuses it on every
// try (MESSAGE_TOO_LARGE) and the source partition stalls behind it. The copy adds headers (the error's text and
// stack, the original headers) to the original's bytes; when that is too large, it is produced again in a
// smaller form. Tested with a DLQ topic whose limit is set small, through the delivery kit's settle() over
// Kafka's verbs (the kit tries the smaller forms; the producer says which one the broker refused).
//
// And a producer it created that failed a send is replaced by a fresh one, so a producer stuck after a broker
// restart cannot stall the partitions whose dead letters it must produce.

import {
  HEADERS,
  MINIMAL_ID_LENGTH,
  parseDeadLetterHeaders,
  PermanentError,
  settle,
  toErrorInfo,
} from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage, Settlement } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import type { Kafka, Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeadLetterProducer, isRecordTooLarge } from '../src/dead-letter-producer.js';
import { kafkaSettlement } from '../src/kafka-settlement.js';
import type { KafkaDelivery } from '../src/kafka-settlement.js';
import { connectedProducer, readTopic, testKafka } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { countingKafka } from './support/counting-kafka.js';

const LIMIT = 8_192;

let kafka: Kafka;
let producer: Producer;
let releaseBroker: (() => void) | undefined;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testKafka();
  producer = await connectedProducer(kafka);
});

afterAll(async () => {
  for (const cleanup of cleanups) await cleanup().catch(() => undefined);
  await producer?.disconnect();
  releaseBroker?.();
});

/** A DLQ topic whose records may hold at most `LIMIT` bytes. */
async function smallTopic(): Promise<string> {
  const topic = uniqueName('small.dlq');
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: 1,
          replicationFactor: 1,
          configEntries: [{ name: 'max.message.bytes', value: String(LIMIT) }],
        },
      ],
    });
  } finally {
    await admin.disconnect();
  }
  cleanups.push(async () => {
    const a = kafka.admin();
    await a.connect();
    await a.deleteTopics({ topics: [topic] }).finally(() => a.disconnect());
  });
  return topic;
}

interface DeadLetter {
  readonly delivery: KafkaDelivery;
  readonly message: InboundMessage;
  readonly outcome: DeadLetterOutcome;
}

function deadLetter(id: string, valueBytes: number, originalHeaderBytes: number): DeadLetter {
  const error = new PermanentError(`refused: ${'why '.repeat(500)}`);
  error.stack = `PermanentError: refused\n${'    at somewhere (file.js:1:1)\n'.repeat(9)}${'x'.repeat(3_000)}`;
  const message: InboundMessage = {
    id,
    body: 'v'.repeat(valueBytes),
    headers: { 'message-id': id },
    source: { transport: 'kafka', destination: 'orders', partition: 0, offset: '7' },
  };
  const outcome: DeadLetterOutcome = {
    status: 'dead-letter',
    messageId: id,
    reason: 'permanent-error',
    attempts: 1,
    error: toErrorInfo(error),
  };
  const record = {
    key: Buffer.from('k'),
    timestamp: String(Date.now()),
    offset: '7',
    value: Buffer.from(message.body as string),
    headers: { 'message-id': id, 'x-trace': 't'.repeat(originalHeaderBytes) },
  };
  return { delivery: { topic: 'orders', partition: 0, record, message }, message, outcome };
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/** Dead-letters each of `letters` in turn as the consumer does: settle() over Kafka's verbs. */
async function send(dlq: DeadLetterProducer, ...letters: DeadLetter[]): Promise<Settlement[]> {
  const port = kafkaSettlement(dlq, 1_000);
  const done: Settlement[] = [];
  for (const l of letters)
    done.push(await settle(port, l.delivery, l.outcome, { logger: silent, what: 'test' }));
  return done;
}

function dlqProducer(topic: string): DeadLetterProducer {
  return new DeadLetterProducer({
    consumerName: 'orders',
    topicFor: () => topic,
    timeoutMs: 30_000,
    producer,
    kafka: undefined,
  });
}

describe('dead letters and the DLQ topic max.message.bytes', () => {
  it('produces a dead letter too large with its headers in a smaller form; its id and reason are kept', async () => {
    const topic = await smallTopic();
    const ok = deadLetter(uniqueName('fits'), 100, 10);
    const big = deadLetter(uniqueName('big'), 5_000, 1_500);
    expect(await send(dlqProducer(topic), ok, big)).toEqual([
      { action: 'dead-lettered', form: 'full' },
      { action: 'dead-lettered', form: 'compact' },
    ]);
    const entries = await readTopic(kafka, topic, 2, 30_000);
    const byId = new Map(entries.map((e) => [e.id, e]));
    const full = parseDeadLetterHeaders(byId.get(ok.message.id)!.headers);
    expect(full?.error?.stack).toContain('PermanentError');
    const cut = byId.get(big.message.id);
    expect(cut).toBeDefined();
    expect(Buffer.from(cut!.body as Uint8Array).length).toBe(5_000);
    expect(parseDeadLetterHeaders(cut!.headers)).toMatchObject({
      originalId: big.message.id,
      reason: 'permanent-error',
      consumer: 'orders',
      attempts: 1,
    });
    expect(cut!.headers[HEADERS.errorStack]).toBeUndefined();
    // Hardening issue, item 3: a smaller form says what it dropped (core's forms, shared by every transport).
    expect(cut!.headers[HEADERS.dropped]).toMatch(/error-stack/);
    expect(byId.get(ok.message.id)!.headers[HEADERS.dropped]).toBeUndefined();
  });

  it('drops the original headers last: a record whose headers alone overflow the topic still arrives', async () => {
    const topic = await smallTopic();
    const huge = deadLetter(uniqueName('huge-headers'), 1_000, 7_500);
    expect(await send(dlqProducer(topic), huge)).toEqual([{ action: 'dead-lettered', form: 'minimal' }]);
    const [entry] = await readTopic(kafka, topic, 1, 30_000);
    expect(entry?.id).toBe(huge.message.id);
    expect(entry?.headers['x-trace']).toBeUndefined();
    expect(entry?.headers[HEADERS.reason]).toBe('permanent-error');
    expect(entry?.headers[HEADERS.dropped]).toBe(
      'original-headers,trace,error-stack,error-message,error-code',
    );
  });

  it('clips, in the minimal form, an id too long for the topic with the other headers, and says so', async () => {
    const topic = await smallTopic();
    const id = `${uniqueName('long-id')}-${'i'.repeat(6_000)}`;
    const letter = deadLetter(id, 100, 10);
    expect(await send(dlqProducer(topic), letter)).toEqual([{ action: 'dead-lettered', form: 'minimal' }]);
    const [entry] = await readTopic(kafka, topic, 1, 30_000);
    expect(entry?.headers[HEADERS.messageId]).toHaveLength(MINIMAL_ID_LENGTH);
    expect(id.startsWith(entry!.headers[HEADERS.messageId]!.slice(0, 3_000))).toBe(true);
    expect(entry?.headers[HEADERS.dropped]).toContain('message-id-clipped');
    expect(entry?.headers[HEADERS.reason]).toBe('permanent-error');
  });

  it('rejects (the source is not committed) a record whose own bytes exceed the DLQ topic', async () => {
    const topic = await smallTopic();
    const [left] = await send(dlqProducer(topic), deadLetter(uniqueName('too-big'), LIMIT + 1_000, 0));
    expect(left).toMatchObject({ action: 'left', why: { cause: 'dead-letter-too-large' } });
    expect(isRecordTooLarge(left?.action === 'left' && left.why.error)).toBe(true);
  });
});

describe('the dead-letter producer after a failed send', () => {
  it('drops the producer it created and produces the next dead letters on a fresh one', async () => {
    const topic = await smallTopic();
    const { client, created } = countingKafka(kafka);
    let target = 'not a topic!';
    const dlq = new DeadLetterProducer({
      consumerName: 'orders',
      topicFor: () => target,
      timeoutMs: 2_000,
      producer: undefined,
      kafka: client,
    });
    await dlq.start();
    const first = deadLetter(uniqueName('retired'), 10, 10);
    expect(await send(dlq, first)).toMatchObject([{ action: 'left', why: { cause: 'dead-letter-failed' } }]);
    target = topic;
    expect(await send(dlq, first)).toEqual([{ action: 'dead-lettered', form: 'full' }]);
    expect(created.map((p) => p.disconnected)).toEqual([true, false]);
    await dlq.stop();
    expect(created.map((p) => p.disconnected)).toEqual([true, true]);
    expect((await readTopic(kafka, topic, 1, 30_000)).map((e) => e.id)).toEqual([first.message.id]);
  });

  it("keeps an application's producer: it is the application's to replace", async () => {
    const { client, created } = countingKafka(kafka);
    const own = client.producer({ idempotent: true });
    await own.connect();
    const dlq = new DeadLetterProducer({
      consumerName: 'orders',
      topicFor: () => 'not a topic!',
      timeoutMs: 2_000,
      producer: own,
      kafka: client,
    });
    await dlq.start();
    expect(await send(dlq, deadLetter(uniqueName('kept'), 10, 10))).toMatchObject([
      { action: 'left', why: { cause: 'dead-letter-failed' } },
    ]);
    await dlq.stop();
    expect(created.map((p) => p.disconnected)).toEqual([false]);
    await own.disconnect();
  });
});
