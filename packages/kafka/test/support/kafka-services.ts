// The test services this package uses, through the project's discovery (test/support): a missing service
// fails the test with a message saying how to start it, never skips it.
// The global setup declares what `inject('services')` holds; the helpers below read it.
import type {} from '../../../../test/support/global-setup.js';
import { requireService, restartService } from '../../../../test/support/services.js';

/** The broker list of the test Kafka. */
export function kafkaBrokers(): string[] {
  return requireService('kafka').brokers;
}

/** The connection string of the test Postgres. */
export function databaseUrl(): string {
  return requireService('postgres').url;
}

/** Restarts the broker (stop, start, wait until ready): for the chaos test. */
export async function restartKafka(): Promise<void> {
  await restartService('kafka', { timeoutMs: 150_000 });
}
