// The test services, as the CLI's flags spell them: a thin view over the repository's shared discovery
// (test/support/services.ts), which fails (never skips) with how to start a missing service.

import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { requireService as shared } from '../../../../test/support/services.js';

/** The value of a connection flag / environment variable for the service the test needs. */
export function requireService(
  name: 'DATABASE_URL' | 'KAFKA_BROKERS' | 'AMQP_URL' | 'SQS_ENDPOINT' | 'NATS_URL',
): string {
  switch (name) {
    case 'DATABASE_URL':
      return shared('postgres').url;
    case 'KAFKA_BROKERS':
      return shared('kafka').brokers.join(',');
    case 'AMQP_URL':
      return shared('rabbitmq').url;
    case 'SQS_ENDPOINT':
      return shared('sqs').endpoint;
    case 'NATS_URL':
      return shared('nats').url;
  }
}

/** The repository root (for running the bin). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
