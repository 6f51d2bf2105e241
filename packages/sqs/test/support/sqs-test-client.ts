// The SQS endpoint of the test services (ElasticMQ) and clients bound to it, from the shared service
// discovery: a test that needs SQS fails with a clear message when it is not there, never skips.

import { DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { uniqueName } from '@inboxkit/testing';

import { createQueues } from '../../src/index.js';
import type { CreatedQueues } from '../../src/index.js';
import { requireService } from '../../../../test/support/services.js';

/** The test SQS server's endpoint (fails, saying how to start it, when there is none). */
export function sqsEndpoint(): string {
  return requireService('sqs').endpoint;
}

/** The test Postgres's URL (fails, saying how to start it, when there is none). */
export function databaseUrl(): string {
  return requireService('postgres').url;
}

/** A client for the test SQS server: its region and (dummy) credentials. */
export function testSqsClient(): SQSClient {
  const sqs = requireService('sqs');
  return new SQSClient({ endpoint: sqs.endpoint, region: sqs.region, credentials: sqs.credentials });
}

/**
 * A client for an SQS endpoint on this host at `port` (a proxy in front of the test server, or a port where
 * nothing listens), failing at once rather than retrying: the start-up tests count the tries themselves.
 */
export function clientAtPort(port: number): SQSClient {
  return new SQSClient({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    maxAttempts: 1,
  });
}

/** Creates a fresh queue pair named after `prefix`, with a redrive policy as `createQueues` sets it. */
export async function freshQueues(
  client: SQSClient,
  prefix: string,
  options: {
    fifo?: boolean;
    maxAttempts?: number;
    headroom?: number;
    visibilityTimeoutSeconds?: number;
  } = {},
): Promise<CreatedQueues> {
  return createQueues({ client, name: uniqueName(prefix), ...options });
}

/** Deletes the queues, ignoring queues already gone. */
export async function deleteQueues(client: SQSClient, queues: CreatedQueues): Promise<void> {
  for (const url of [queues.queueUrl, queues.deadLetterQueueUrl]) {
    await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
  }
}
