// createQueues() called at start-up while SQS cannot be reached must wait for it, as declareTopology and the
// migrations do, instead of failing after the SDK's own retries and taking the process with it. The client's
// endpoint is a proxy on a port with nothing listening, which starts listening (SQS comes up) a few seconds
// later; `startTimeoutMs` bounds the wait with a StartTimeoutError.

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { uniqueName } from '@inboxkit/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createQueues, StartTimeoutError } from '../src/index.js';
import type { CreatedQueues } from '../src/index.js';
import { clientAtPort, deleteQueues, sqsEndpoint, testSqsClient } from './support/sqs-test-client.js';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import type { TcpProxy } from '../../../test/support/tcp-proxy.js';
import { recordingLogger } from '../../../test/support/recording-logger.js';

let admin: SQSClient;
let proxy: TcpProxy;
const created: CreatedQueues[] = [];

beforeAll(async () => {
  admin = testSqsClient();
  const endpoint = new URL(sqsEndpoint());
  proxy = await tcpProxy({ host: endpoint.hostname, port: Number(endpoint.port) });
});

afterAll(async () => {
  await proxy.close();
  for (const q of created) await deleteQueues(admin, q);
  admin.destroy();
});

const fast = { initialDelayMs: 50, maxDelayMs: 400 };

describe('createQueues while SQS is down', () => {
  it('keeps trying until SQS listens, then creates both queues with the redrive policy', async () => {
    await proxy.close();
    const client = clientAtPort(proxy.port);
    const { logger, warnings } = recordingLogger();
    const name = uniqueName('cq-wait');
    let settled = false;
    const creating = createQueues({ client, name, maxAttempts: 3, reconnect: fast, logger }).finally(() => {
      settled = true;
    });
    try {
      await expect.poll(() => warnings.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(3);
      expect(settled).toBe(false);
      expect(warnings[0]!.msg).toMatch(/createQueues: cannot connect at start; retrying/);
      expect(JSON.stringify(warnings[0]!.obj)).toMatch(/ECONNREFUSED/);
      await new Promise((resolve) => setTimeout(resolve, 2_000)); // SQS comes up a few seconds later
      await proxy.open();
      const queues = await creating;
      created.push(queues);
      const { Attributes } = await admin.send(
        new GetQueueAttributesCommand({ QueueUrl: queues.queueUrl, AttributeNames: ['RedrivePolicy'] }),
      );
      expect(JSON.parse(Attributes?.RedrivePolicy ?? '{}')).toMatchObject({
        deadLetterTargetArn: queues.deadLetterQueueArn,
      });
    } finally {
      client.destroy();
      await proxy.close();
    }
  });

  it('rejects with a StartTimeoutError naming the last error once startTimeoutMs has passed', async () => {
    await proxy.close();
    const client = clientAtPort(proxy.port);
    try {
      const error = await createQueues({
        client,
        name: uniqueName('cq-timeout'),
        startTimeoutMs: 1_500,
        reconnect: fast,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StartTimeoutError);
      expect((error as StartTimeoutError).attempts).toBeGreaterThan(1);
      expect((error as Error).message).toMatch(
        /^createQueues could not connect within startTimeoutMs \(1500 ms/,
      );
      expect((error as Error).message).toMatch(/SQS/);
    } finally {
      client.destroy();
    }
  });

  it('ends the wait when its signal aborts, rejecting with the reason', async () => {
    await proxy.close();
    const client = clientAtPort(proxy.port);
    const controller = new AbortController();
    const { logger, warnings } = recordingLogger();
    try {
      const creating = createQueues({
        client,
        name: uniqueName('cq-abort'),
        reconnect: fast,
        logger,
        signal: controller.signal,
      });
      await expect.poll(() => warnings.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
      const reason = new Error('shutting down');
      controller.abort(reason);
      await expect(creating).rejects.toBe(reason);
    } finally {
      client.destroy();
    }
  });
});
