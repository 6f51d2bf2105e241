// vitest globalSetup: finds PostgreSQL, Kafka, RabbitMQ, an SQS server and Redis for the whole run (starting the
// project's own services when none is found, see find-services.ts) and provides them to every test as
// `inject('services')` (use test/support/services.ts rather than inject directly).
//
// vitest runs a global setup once per project (each package is a project), in its main process, with no
// timeout (a first start that installs packages takes minutes): discovery runs once, every project shares it,
// and what it started is stopped after the last project's teardown.
import type { TestProject } from 'vitest/node';
import type { DiscoveredServices } from './discovery.js';
import { ServicesNotStartedError, findServices } from './find-services.js';

const log = (message: string) => console.log(`[services] ${message}`);

interface Shared {
  discovery: Promise<{ services: DiscoveredServices; stop: () => Promise<void> }>;
  users: number;
}
const SHARED_KEY = Symbol.for('inboxkit.test.services');
const shared = globalThis as typeof globalThis & { [SHARED_KEY]?: Shared };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const state = (shared[SHARED_KEY] ??= { discovery: discover(), users: 0 });
  state.users += 1;
  const { services, stop } = await state.discovery;
  project.provide('services', services);
  return async () => {
    state.users -= 1;
    if (state.users === 0) {
      delete shared[SHARED_KEY];
      await stop();
    }
  };
}

async function discover(): Promise<{ services: DiscoveredServices; stop: () => Promise<void> }> {
  try {
    const { services, env, stop } = await findServices({ log, again: 'npm test' });
    // Code under test that reads the conventional variables (and child processes) sees the same servers.
    for (const [key, value] of Object.entries(env)) process.env[key] ??= value;
    return { services, stop };
  } catch (error) {
    if (!(error instanceof ServicesNotStartedError)) throw error;
    // One message, and the run ends here instead of failing every test that needs a service (thrown, vitest
    // would also report "No test files found").
    console.error(`\n[services] ${error.message}\n`);
    process.exit(1);
  }
}
