// The Publisher port on Kafka: acks from all replicas, the id as the message-id header, the key, and failures
// as PublishError. Every test runs on each Kafka client (kafkajs, and @platformatic/kafka through
// platformaticKafka()); topics are created with kafkajs' admin.
import { ConfigurationError, MessageTooLargeError, PublishError } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import type { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kafkaPublisher } from '../src/index.js';
import type { KafkaClientLike, KafkaProducerLike } from '../src/index.js';
import {
  KAFKA_TEST_CLIENTS,
  connectedProducer,
  createTopics,
  readTopic,
  testClient,
  testKafka,
} from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { countingKafka } from './support/counting-kafka.js';

/** kafkajs, for the topics' admin. */
let admin: Kafka;

let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  admin = testKafka();
});

afterAll(() => releaseBroker?.());

describe.each(KAFKA_TEST_CLIENTS)('kafkaPublisher on %s', (clientName) => {
  /** The client under test, and an application's producer of it (connected). */
  let kafka: KafkaClientLike;
  let producer: KafkaProducerLike;
  beforeAll(async () => {
    kafka = testClient(clientName);
    if (clientName === 'kafkajs') producer = await connectedProducer(kafka as Kafka);
    else {
      producer = kafka.producer({ idempotent: true });
      await producer.connect();
    }
  });
  afterAll(async () => {
    await producer?.disconnect();
  });

  it('names a record over its topic max.message.bytes in a non-retriable MessageTooLargeError, after confirming the ones before it', async () => {
    // Hardening issue, item 3: a message the broker refuses on every attempt must not look like an outage to
    // the outbox relay (which parks the row a MessageTooLargeError names, and retries a PublishError).
    const topic = uniqueName('pub-small');
    const topicAdmin = admin.admin();
    await topicAdmin.connect();
    await topicAdmin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: 1,
          replicationFactor: 1,
          configEntries: [{ name: 'max.message.bytes', value: '4096' }],
        },
      ],
    });
    await topicAdmin.disconnect();
    const publisher = kafkaPublisher({ producer });
    const error = await publisher
      .publish([
        { destination: topic, id: 'fits-1', body: 'a' },
        { destination: topic, id: 'too-big', body: 'b'.repeat(10_000) },
        { destination: topic, id: 'fits-2', body: 'c' },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect(error).toMatchObject({ messageId: 'too-big', retriable: false, code: 'MESSAGE_TOO_LARGE' });
    expect((await readTopic(kafka, topic, 1, 10_000)).map((e) => e.id)).toEqual(['fits-1']);
    const a = admin.admin();
    await a.connect();
    await a.deleteTopics({ topics: [topic] }).finally(() => a.disconnect());
  });

  it('publishes with the message-id header, the key, headers and body, to each destination topic', async () => {
    const a = uniqueName('pub-a');
    const b = uniqueName('pub-b');
    const cleanup = await createTopics(admin, [
      { topic: a, partitions: 1 },
      { topic: b, partitions: 1 },
    ]);
    const publisher = kafkaPublisher({ producer });
    await publisher.publish([
      { destination: a, id: 'pay-1', key: 'acct-7', body: '{"amount":5}', headers: { traceparent: '00-1' } },
      { destination: b, id: 'pay-2', body: new Uint8Array([1, 2, 3]) },
      {
        destination: a,
        id: 'pay-3',
        key: 'acct-7',
        body: '{"amount":6}',
        timestamp: new Date(1_700_000_000_000),
      },
    ]);
    await publisher.close();
    const inA = await readTopic(kafka, a, 2, 10_000);
    expect(inA.map((e) => [e.id, (e as { key?: string }).key, e.headers['traceparent']])).toEqual([
      ['pay-1', 'acct-7', '00-1'],
      ['pay-3', 'acct-7', undefined],
    ]);
    expect(Buffer.from(inA[0]!.body as Uint8Array).toString()).toBe('{"amount":5}');
    const inB = await readTopic(kafka, b, 1, 10_000);
    expect([...(inB[0]!.body as Uint8Array)]).toEqual([1, 2, 3]);
    // close() left the application's producer connected.
    await producer.sendBatch({
      acks: -1,
      topicMessages: [{ topic: b, messages: [{ value: 'still connected' }] }],
    });
    await cleanup();
  });

  it('creates, connects and closes its own producer when given the client', async () => {
    const topic = uniqueName('pub-own');
    const cleanup = await createTopics(admin, [{ topic, partitions: 1 }]);
    const publisher = kafkaPublisher({ kafka });
    await publisher.publish([{ destination: topic, id: 'x-1', body: 'x' }]);
    await publisher.close();
    await expect(publisher.publish([{ destination: topic, id: 'x-2', body: 'x' }])).rejects.toThrow(
      PublishError,
    );
    expect((await readTopic(kafka, topic, 1, 10_000)).map((e) => e.id)).toEqual(['x-1']);
    await cleanup();
  });

  it('rejects a delay (Kafka has none) and reports an unconfirmed produce as PublishError', async () => {
    const publisher = kafkaPublisher({ producer, timeoutMs: 2_000 });
    await expect(
      publisher.publish([{ destination: 'anywhere', id: 'd-1', body: 'x', delayMs: 1_000 }]),
    ).rejects.toThrow(ConfigurationError);
    await expect(publisher.publish([{ destination: 'not a topic!', id: 'e-1', body: 'x' }])).rejects.toThrow(
      PublishError,
    );
  });

  it('drops its own producer after a failed send and publishes on a fresh one', async () => {
    // After a broker restart an idempotent producer can refuse every later send ("out of order sequence
    // number"): a publisher that kept it would never recover. Any failed send retires the producer it created.
    const topic = uniqueName('pub-fresh');
    const cleanup = await createTopics(admin, [{ topic, partitions: 1 }]);
    const { client: counting, created } = countingKafka(kafka);
    const publisher = kafkaPublisher({ kafka: counting, timeoutMs: 2_000 });
    await publisher.publish([{ destination: topic, id: 'f-1', body: 'x' }]);
    await expect(publisher.publish([{ destination: 'not a topic!', id: 'f-2', body: 'x' }])).rejects.toThrow(
      PublishError,
    );
    await publisher.publish([{ destination: topic, id: 'f-3', body: 'x' }]);
    expect(created.length).toBe(2);
    expect(created[0]!.disconnected).toBe(true);
    expect(created[1]!.disconnected).toBe(false);
    await publisher.close();
    expect(created[1]!.disconnected).toBe(true);
    expect((await readTopic(kafka, topic, 2, 10_000)).map((e) => e.id)).toEqual(['f-1', 'f-3']);
    await cleanup();
  });
});
