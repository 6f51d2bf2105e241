// start() while Kafka cannot be reached: the transport keeps trying (the client's only broker is a proxy on a
// port of its own, refused until the test opens it), becomes ready once it can connect and join, and applies
// every record once; a SASL login the broker refuses rejects at once with a ConfigurationError; stop() ends a
// start that is still retrying; startTimeoutMs bounds it.
import { ConfigurationError, idempotentConsumer } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';
import type { Producer } from 'kafkajs';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kafkaConsumer, StartTimeoutError } from '../src/index.js';
import { kafkaStartFailure } from '../src/start-retry.js';
import { FAST_GROUP, connectedProducer, createTopics, testKafka } from './kafka-harness.js';
import { holdBrokerShared } from './support/broker-lock.js';
import { kafkaBrokers } from './support/kafka-services.js';
import { schemaName, testDatabase } from './support/postgres.js';
import type { TestDatabase } from './support/postgres.js';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import { recordingLogger } from '../../../test/support/recording-logger.js';

let kafka: Kafka;
let producer: Producer;
let database: TestDatabase;
let releaseBroker: (() => void) | undefined;

beforeAll(async () => {
  releaseBroker = await holdBrokerShared();
  kafka = testKafka();
  producer = await connectedProducer(kafka);
  database = await testDatabase(schemaName(uniqueName('kafka_start')));
});

afterAll(async () => {
  await producer?.disconnect();
  await database?.dispose();
  releaseBroker?.();
});

/** A client whose only broker is `port` on this host; its own retries kept short. */
function kafkaAt(port: number, extra: Partial<ConstructorParameters<typeof Kafka>[0]> = {}): Kafka {
  return new Kafka({
    clientId: uniqueName('start'),
    brokers: [`127.0.0.1:${port}`],
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 50, retries: 1, maxRetryTime: 200 },
    connectionTimeout: 1_000,
    ...extra,
  });
}

function handlerOf(name: string) {
  return idempotentConsumer<unknown, Transaction<unknown>>({
    name,
    store: database.store,
    handler: async (message, context) => {
      await database.applyEffect(context.tx, message.id);
    },
  });
}

describe('kafkaConsumer start() while Kafka is down', () => {
  it('keeps trying, becomes ready once Kafka is reachable, and applies every record once', async () => {
    const topic = uniqueName('start');
    const cleanup = await createTopics(kafka, [
      { topic, partitions: 2 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    const [host, port] = kafkaBrokers()[0]!.split(':');
    const proxy = await tcpProxy({ host: host!, port: Number(port) });
    const { logger, warnings } = recordingLogger();
    const client = kafkaAt(proxy.port);
    const consumer = client.consumer({ groupId: uniqueName('group'), ...FAST_GROUP });
    const transport = kafkaConsumer({
      consumer,
      kafka: client,
      topics: [topic],
      handler: handlerOf(uniqueName('start')),
      fromBeginning: true,
      startRetry: { initialDelayMs: 50, maxDelayMs: 200 },
      logger,
    });
    const ids = Array.from({ length: 40 }, (_, n) => `r-${n}`);
    try {
      await producer.send({
        topic,
        acks: -1,
        messages: ids.slice(0, 20).map((id) => ({ key: id, value: '{}', headers: { 'message-id': id } })),
      });
      let ready = false;
      const started = transport.start().then(() => {
        ready = true;
      });
      await expect.poll(() => warnings.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
      expect(ready).toBe(false);
      expect(warnings[0]!.msg).toMatch(/cannot connect at start; retrying/);
      expect(warnings[0]!.obj).toMatchObject({ attempt: 1 });
      expect((warnings[0]!.obj as { retryInMs: number }).retryInMs).toBeGreaterThan(0);
      expect(JSON.stringify(warnings[0]!.obj)).toMatch(/ECONNREFUSED/);

      await proxy.open();
      await started;
      await producer.send({
        topic,
        acks: -1,
        messages: ids.slice(20).map((id) => ({ key: id, value: '{}', headers: { 'message-id': id } })),
      });
      await expect
        .poll(async () => (await database.effectCounts()).size, { timeout: 60_000 })
        .toBeGreaterThanOrEqual(ids.length);
      const counts = await database.effectCounts();
      expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
    } finally {
      await transport.stop();
      await consumer.disconnect();
      await proxy.close();
      await cleanup();
    }
  });

  it('rejects at once with a ConfigurationError when the broker refuses the SASL login', async () => {
    const [, port] = kafkaBrokers()[0]!.split(':');
    const client = kafkaAt(Number(port), {
      sasl: { mechanism: 'plain', username: 'nobody', password: 'wrong' },
    });
    const { logger, warnings } = recordingLogger();
    const consumer = client.consumer({ groupId: uniqueName('group') });
    const transport = kafkaConsumer({
      consumer,
      kafka: client,
      topics: [uniqueName('never')],
      handler: handlerOf(uniqueName('sasl')),
      logger,
    });
    const error = await transport.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/refused the client's credentials.*sasl/);
    expect(warnings).toEqual([]);
    await transport.stop();
  });

  it('stop() ends a start that is still retrying; start() resolves without starting', async () => {
    const closed = await tcpProxy({ host: '127.0.0.1', port: 1 });
    const client = kafkaAt(closed.port);
    const { logger, warnings } = recordingLogger();
    const transport = kafkaConsumer({
      consumer: client.consumer({ groupId: uniqueName('group') }),
      kafka: client,
      topics: [uniqueName('never')],
      handler: handlerOf(uniqueName('stop')),
      startRetry: { initialDelayMs: 60_000, maxDelayMs: 60_000 },
      logger,
    });
    const started = transport.start();
    await expect.poll(() => warnings.length, { timeout: 20_000 }).toBe(1);
    await transport.stop(); // the start is now pausing for at least 30 s
    await expect(started).resolves.toBeUndefined();
    expect(warnings).toHaveLength(1);
  });

  it('rejects with a StartTimeoutError once startTimeoutMs has passed', async () => {
    const closed = await tcpProxy({ host: '127.0.0.1', port: 1 });
    const client = kafkaAt(closed.port);
    const transport = kafkaConsumer({
      consumer: client.consumer({ groupId: uniqueName('group') }),
      kafka: client,
      topics: [uniqueName('never')],
      handler: handlerOf(uniqueName('timeout')),
      startRetry: { initialDelayMs: 20, maxDelayMs: 50 },
      startTimeoutMs: 1_000,
    });
    const error = await transport.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StartTimeoutError);
    expect(error).toMatchObject({ code: 'START_TIMEOUT' });
    expect((error as Error).message).toMatch(/startTimeoutMs \(1000 ms/);
  });
});

describe('kafkaStartFailure', () => {
  const kafkaError = (name: string, props: Record<string, unknown> = {}, cause?: unknown) =>
    Object.assign(new Error(name), { name, ...props }, cause === undefined ? {} : { cause });
  it('retries what a later attempt can get past, rejects what it cannot', () => {
    for (const transient of [
      kafkaError(
        'KafkaJSNumberOfRetriesExceeded',
        { retriable: false },
        kafkaError('KafkaJSConnectionError', { retriable: true, code: 'ECONNREFUSED' }),
      ),
      kafkaError('KafkaJSProtocolError', { retriable: true, type: 'COORDINATOR_NOT_AVAILABLE' }),
      kafkaError('KafkaJSProtocolError', { retriable: true, type: 'LEADER_NOT_AVAILABLE' }),
      kafkaError('KafkaJSRequestTimeoutError', { retriable: true }),
      kafkaError('KafkaJSGroupCoordinatorNotFound', { retriable: false }),
    ])
      expect(kafkaStartFailure(transient), transient.name).toBeUndefined();
    for (const permanent of [
      kafkaError('KafkaJSSASLAuthenticationError', { retriable: false }),
      kafkaError('KafkaJSProtocolError', { retriable: false, type: 'ILLEGAL_SASL_STATE' }),
      kafkaError(
        'KafkaJSNonRetriableError',
        { retriable: false },
        kafkaError('KafkaJSProtocolError', { retriable: false, type: 'GROUP_AUTHORIZATION_FAILED' }),
      ),
      kafkaError('KafkaJSProtocolError', { retriable: false, type: 'INVALID_SESSION_TIMEOUT' }),
      new TypeError('brokers must be an array'),
    ])
      expect(kafkaStartFailure(permanent), String(permanent)).toBeInstanceOf(ConfigurationError);
    const other = kafkaError('KafkaJSNonRetriableError', { retriable: false });
    expect(kafkaStartFailure(other)).toBe(other);
  });
});
