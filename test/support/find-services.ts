// Finds the test services, per service in this order (see discovery.ts): the environment → testcontainers (only
// when a Docker engine answers) → the project's own running services (.services/env, only while this checkout's
// own process serves them) → the project's own services started for this run (unless
// INBOXKIT_START_SERVICES=0). Used by the vitest global setup and by
// scripts/services/with-services.ts (the examples' runner).
//
// INBOXKIT_TESTCONTAINERS=0 never tries Docker; =1 reports why it could not be used.
import { existsSync } from 'node:fs';
import {
  CATALOG,
  ENV_VAR,
  SERVICE_NAMES,
  SERVICES_ENV_FILE,
  SERVICES_SCRIPT,
  answers,
  describeService,
  ownService,
  readServicesEnv,
  setService,
  type DiscoveredServices,
  type ServiceName,
  type ServiceSource,
} from './discovery.js';
import { ServicesNotStartedError, startOwnServices } from './own-services.js';
import { dockerEngine, startContainers } from './test-containers.js';

export interface FoundServices {
  services: DiscoveredServices;
  /** The variables that point a child process (or code reading process.env) at the same servers. */
  env: Record<string, string>;
  /** Stops what this discovery started (containers, own services); never what was running before. */
  stop: () => Promise<void>;
}

export interface FindOptions {
  /** The services wanted. Default is all of them. */
  names?: readonly ServiceName[];
  /** Progress lines. */
  log: (message: string) => void;
  /** The command the user runs again after fixing a missing prerequisite (for the message). */
  again: string;
  /** Whether to start the own services that are not running. Default is INBOXKIT_START_SERVICES != 0. */
  start?: boolean;
}

type Found = { value: string; source: ServiceSource; extra: Record<string, string> };

export { ServicesNotStartedError };

/**
 * Discovers (and when needed starts) the services. Throws ServicesNotStartedError when a wanted service is found
 * nowhere and could not be started, or is set explicitly in the environment and does not answer: one message
 * instead of a failing test per connection.
 */
export async function findServices(options: FindOptions): Promise<FoundServices> {
  const names = options.names ?? SERVICE_NAMES;
  const { log } = options;
  const startSetting = process.env['INBOXKIT_START_SERVICES'];
  const start =
    options.start ?? !(startSetting === '0' || startSetting === 'false' || startSetting === 'never');
  const found = new Map<ServiceName, Found>();
  const tried: Partial<Record<ServiceName, string[]>> = {};
  // A setting given explicitly in the environment is never replaced by another server.
  const explicit = new Set<ServiceName>();
  const note = (name: ServiceName, what: string) => (tried[name] ??= []).push(what);
  const open = () => names.filter((name) => !found.has(name) && !explicit.has(name));
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const step of stops.reverse()) await step();
  };

  // 1. The environment.
  await Promise.all(
    names.map(async (name) => {
      const value = process.env[ENV_VAR[name]];
      if (!value) return;
      explicit.add(name);
      if (await answers(name, value)) {
        found.set(name, { value, source: 'env', extra: { ...(process.env as Record<string, string>) } });
      } else {
        note(name, `${ENV_VAR[name]}=${value} does not answer`);
      }
    }),
  );

  // 2. testcontainers, when a Docker engine answers.
  if (open().length > 0) {
    const engine = await dockerEngine();
    if (engine.ok) {
      log(`Docker engine at ${engine.where}: starting ${open().join(', ')} with testcontainers`);
      const started = await startContainers(open());
      stops.push(started.stop);
      for (const [name, value] of started.found)
        found.set(name, { value, source: 'testcontainers', extra: {} });
      for (const [name, reason] of started.failed) note(name, `testcontainers: ${reason}`);
    } else if (process.env['INBOXKIT_TESTCONTAINERS'] === '1') {
      log(`testcontainers not used: ${engine.where}`);
    }
  }

  // 3. The project's own services, running: only while this checkout's own process serves the address that
  // .services/env names. Whatever else answers there (another checkout's server, which took the port while ours
  // was stopped) is never used.
  const lookOwn = async () => {
    const own = readServicesEnv();
    await Promise.all(
      open().map(async (name) => {
        const value = own[ENV_VAR[name]];
        if (!value) {
          note(name, `no ${ENV_VAR[name]} in ${SERVICES_ENV_FILE}`);
        } else if (!ownService(name, value)) {
          note(
            name,
            `${ENV_VAR[name]}=${value} from .services/env is not served by this checkout's ${CATALOG[name].script} ` +
              `(stopped${(await answers(name, value)) ? '; another process answers there and is not used' : ''})`,
          );
        } else if (await answers(name, value)) {
          found.set(name, { value, source: 'services', extra: own });
        } else {
          note(name, `${ENV_VAR[name]}=${value} from .services/env does not answer (stopped?)`);
        }
      }),
    );
    return own;
  };
  let own = await lookOwn();

  // 4. The project's own services, started for this run.
  const startedHere = new Set<ServiceName>();
  if (start && open().length > 0) {
    const wanted = open();
    try {
      const started = await startOwnServices(wanted, { log, again: options.again });
      stops.push(() => started.stop());
    } catch (error) {
      await stop();
      throw error;
    }
    own = await lookOwn();
    for (const name of wanted) if (found.has(name)) startedHere.add(name);
  }

  const services: DiscoveredServices = { missing: {} };
  const env: Record<string, string> = {};
  for (const name of names) {
    const hit = found.get(name);
    if (!hit) {
      services.missing[name] = (tried[name] ?? ['not found']).join('; ');
      continue;
    }
    setService(services, name, describeService(name, hit.value, hit.source, hit.extra));
    env[ENV_VAR[name]] = hit.value;
  }
  if ([...found.values()].some((f) => f.source === 'services') && existsSync(SERVICES_SCRIPT)) {
    services.servicesScript = own['INBOXKIT_SERVICES_SCRIPT'] || SERVICES_SCRIPT;
    env['INBOXKIT_SERVICES_SCRIPT'] = services.servicesScript;
    if (own['RABBITMQ_CTL']) env['RABBITMQ_CTL'] = own['RABBITMQ_CTL'];
  }
  if (services.sqs) {
    env['SQS_REGION'] = services.sqs.region;
    env['AWS_REGION'] = services.sqs.region;
    env['AWS_ACCESS_KEY_ID'] = services.sqs.credentials.accessKeyId;
    env['AWS_SECRET_ACCESS_KEY'] = services.sqs.credentials.secretAccessKey;
  }

  log(
    names
      .map((name) => {
        const hit = found.get(name);
        if (!hit) return `${name} MISSING (${services.missing[name] ?? 'not found'})`;
        return `${name} (${startedHere.has(name) ? 'started for this run' : hit.source}: ${hit.value})`;
      })
      .join(', '),
  );
  const missing = Object.keys(services.missing) as ServiceName[];
  if (missing.length > 0 && start) {
    // Only a setting given explicitly that does not answer gets here: the other services were started.
    await stop();
    throw new ServicesNotStartedError(
      missing.map((name) => `${name}: ${services.missing[name]}`).join('; ') +
        `. Start ${missing.length === 1 ? 'that server' : 'those servers'}, or unset ` +
        `${missing.map((name) => ENV_VAR[name]).join(', ')} to use the project's own services ` +
        `(${missing.map((name) => CATALOG[name].script).join(', ')}), which \`${options.again}\` starts when none runs.`,
    );
  }
  if (missing.length > 0) {
    log(`tests that need ${missing.join(', ')} will fail; start them with \`npm run services:up\``);
  }
  return { services, env, stop };
}
