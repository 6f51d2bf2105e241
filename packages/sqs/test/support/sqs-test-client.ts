// The SQS endpoint of the test services (ElasticMQ) and clients bound to it. A test that needs SQS fails
// with a clear message when it is not configured, never skips.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { uniqueName } from '@inboxkit/testing';

import { createQueues } from '../../src/index.js';
import type { CreatedQueues } from '../../src/index.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

function fromServicesEnv(name: string): string | undefined {
  const file = resolve(repoRoot, '.services/env');
  if (!existsSync(file)) return undefined;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const match = /^(?:export\s+)?([A-Z_]+)=["']?(.*?)["']?$/.exec(line.trim());
    if (match?.[1] === name) return match[2];
  }
  return undefined;
}

/** A setting from the environment, else from `.services/env`; throws saying how to start the services. */
export function requireSetting(name: 'SQS_ENDPOINT' | 'DATABASE_URL'): string {
  const value = process.env[name] ?? fromServicesEnv(name);
  if (value === undefined || value === '') {
    throw new Error(
      `${name} is not set and .services/env has none: start the test services with \`npm run services:up\``,
    );
  }
  return value;
}

/** A client for the test SQS server: region us-east-1, dummy credentials. */
export function testSqsClient(): SQSClient {
  return new SQSClient({
    endpoint: requireSetting('SQS_ENDPOINT'),
    region: 'us-east-1',
    credentials: { accessKeyId: 'inboxkit', secretAccessKey: 'inboxkit' },
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
