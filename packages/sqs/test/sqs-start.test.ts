// start() while SQS cannot be reached: the consumer keeps trying its start-up check (the client's endpoint is a
// proxy on a port of its own, refused until the test opens it), becomes ready once SQS answers and applies every
// message once; refused credentials reject at once with a ConfigurationError; stop() ends a start that is still
// retrying; startTimeoutMs bounds it.

import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { ConfigurationError, idempotentConsumer } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { uniqueName } from '@inboxkit/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sqsConsumer, StartTimeoutError } from '../src/index.js';
import type { CreatedQueues } from '../src/index.js';
import { sqsStartFailure } from '../src/start-retry.js';
import { effectCounts, insertEffect, openTestDatabase } from './support/postgres.js';
import type { TestDB, TestDatabase, TestTx } from './support/postgres.js';
import {
  clientAtPort,
  deleteQueues,
  freshQueues,
  sqsEndpoint,
  testSqsClient,
} from './support/sqs-test-client.js';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import { recordingLogger } from '../../../test/support/recording-logger.js';

let database: TestDatabase;
let admin: SQSClient;
let queues: CreatedQueues;
let store: PostgresInboxStore<TestDB>;

beforeAll(async () => {
  database = await openTestDatabase('start');
  store = new PostgresInboxStore({ db: database.db, schema: database.schema });
  admin = testSqsClient();
  queues = await freshQueues(admin, 'start', { maxAttempts: 5 });
});

afterAll(async () => {
  await deleteQueues(admin, queues);
  admin.destroy();
  await database.close();
});

function handlerOf(name: string) {
  return idempotentConsumer<unknown, TestTx>({
    name,
    store,
    handlerTimeoutMs: 5_000,
    handler: async (message, context) => {
      await insertEffect(context.tx, database.schema, { consumer: name, messageId: message.id });
    },
  });
}

async function send(ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 10) {
    await admin.send(
      new SendMessageBatchCommand({
        QueueUrl: queues.queueUrl,
        Entries: ids.slice(i, i + 10).map((id, k) => ({
          Id: String(k),
          MessageBody: '{}',
          MessageAttributes: { 'message-id': { DataType: 'String', StringValue: id } },
        })),
      }),
    );
  }
}

describe('sqsConsumer start() while SQS is down', () => {
  it('keeps trying, becomes ready once SQS answers, and applies every message once', async () => {
    const endpoint = new URL(sqsEndpoint());
    const proxy = await tcpProxy({ host: endpoint.hostname, port: Number(endpoint.port) });
    const client = clientAtPort(proxy.port);
    const name = uniqueName('start');
    const { logger, warnings } = recordingLogger();
    const consumer = sqsConsumer({
      client,
      queueUrl: queues.queueUrl,
      deadLetterQueueUrl: queues.deadLetterQueueUrl,
      handler: handlerOf(name),
      visibilityTimeoutSeconds: 10,
      waitTimeSeconds: 1,
      logger,
    });
    const ids = Array.from({ length: 30 }, (_, n) => `s-${n}`);
    try {
      await send(ids.slice(0, 15));
      let ready = false;
      const started = consumer.start().then(() => {
        ready = true;
      });
      await expect.poll(() => warnings.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(3);
      expect(ready).toBe(false);
      expect(warnings[0]!.msg).toMatch(/cannot connect at start; retrying/);
      expect(warnings[0]!.obj).toMatchObject({ attempt: 1, retryInMs: 100 });
      expect(JSON.stringify(warnings[0]!.obj)).toMatch(/ECONNREFUSED/);

      await proxy.open();
      await started;
      await send(ids.slice(15));
      await expect
        .poll(async () => (await effectCounts(database.db, database.schema, name)).size, { timeout: 30_000 })
        .toBe(ids.length);
      const counts = await effectCounts(database.db, database.schema, name);
      expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
    } finally {
      await consumer.stop();
      client.destroy();
      await proxy.close();
    }
  });

  it('rejects at once with a ConfigurationError when SQS refuses the credentials', async () => {
    const refused = Object.assign(new Error('The security token included in the request is invalid.'), {
      name: 'InvalidClientTokenId',
      $fault: 'client',
      $metadata: { httpStatusCode: 403 },
    });
    let calls = 0;
    const client = {
      send: async () => {
        calls++;
        throw refused;
      },
    } as unknown as SQSClient;
    const { logger, warnings } = recordingLogger();
    const consumer = sqsConsumer({
      client,
      queueUrl: queues.queueUrl,
      deadLetterQueueUrl: queues.deadLetterQueueUrl,
      handler: handlerOf(uniqueName('creds')),
      visibilityTimeoutSeconds: 10,
      logger,
    });
    const error = await consumer.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/refused the client's credentials.*region/);
    expect(calls).toBe(2); // one read of each queue's attributes, no retry
    expect(warnings).toEqual([]);
    await consumer.stop();
  });

  it('stop() ends a start that is still retrying; start() resolves without starting', async () => {
    const closed = await tcpProxy({ host: '127.0.0.1', port: 1 });
    const client = clientAtPort(closed.port);
    const { logger, warnings } = recordingLogger();
    const consumer = sqsConsumer({
      client,
      queueUrl: queues.queueUrl,
      deadLetterQueueUrl: queues.deadLetterQueueUrl,
      handler: handlerOf(uniqueName('stop')),
      visibilityTimeoutSeconds: 10,
      logger,
    });
    const started = consumer.start();
    await expect.poll(() => warnings.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(2);
    await consumer.stop();
    await expect(started).resolves.toBeUndefined();
    const after = warnings.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(warnings.length).toBe(after); // no attempt after stop()
    client.destroy();
  });

  it('rejects with a StartTimeoutError once startTimeoutMs has passed', async () => {
    const closed = await tcpProxy({ host: '127.0.0.1', port: 1 });
    const client = clientAtPort(closed.port);
    const consumer = sqsConsumer({
      client,
      queueUrl: queues.queueUrl,
      deadLetterQueueUrl: queues.deadLetterQueueUrl,
      handler: handlerOf(uniqueName('timeout')),
      visibilityTimeoutSeconds: 10,
      startTimeoutMs: 500,
    });
    const error = await consumer.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StartTimeoutError);
    expect((error as Error).message).toMatch(/startTimeoutMs \(500 ms.*ECONNREFUSED/);
    client.destroy();
  });
});

describe('sqsStartFailure', () => {
  const sdkError = (name: string, props: Record<string, unknown> = {}) =>
    Object.assign(new Error(name), { name, ...props });
  it('retries what a later request can get past, rejects what it cannot', () => {
    for (const transient of [
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      sdkError('TimeoutError'),
      sdkError('ThrottlingException', { $fault: 'client', $retryable: { throttling: true } }),
      sdkError('InternalError', { $fault: 'server', $metadata: { httpStatusCode: 500 } }),
    ])
      expect(sqsStartFailure(transient), transient.name).toBeUndefined();
    for (const permanent of [
      sdkError('InvalidClientTokenId', { $fault: 'client' }),
      sdkError('AccessDenied', { $fault: 'client' }),
      sdkError('SignatureDoesNotMatch', { $fault: 'client' }),
      sdkError('CredentialsProviderError'),
      new ConfigurationError('queue missing'),
    ])
      expect(sqsStartFailure(permanent), String(permanent)).toBeInstanceOf(ConfigurationError);
  });
});
