// Where the test broker and database are, through the repository's shared service discovery
// (test/support/services.ts: the environment, testcontainers, or `npm run services:up`). A test that needs a
// missing service fails with a message saying how to start it; it never skips.

import { requireService, restartService } from '../../../test/support/services.js';

/** The AMQP URL of the test RabbitMQ. */
export function amqpUrl(): string {
  return requireService('rabbitmq').url;
}

/** The Postgres URL of the test database. */
export function databaseUrl(): string {
  return requireService('postgres').url;
}

/**
 * Restarts the shared RabbitMQ (stop, then start; resolves once it accepts connections again). Every
 * connection to it drops, as in a real broker restart.
 */
export async function restartRabbitmq(): Promise<void> {
  await restartService('rabbitmq');
}
