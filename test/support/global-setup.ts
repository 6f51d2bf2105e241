// vitest globalSetup: finds PostgreSQL, Kafka, RabbitMQ, an SQS server and Redis for the whole run and provides them to
// every test as `inject('services')` (use test/support/services.ts rather than inject directly). Order, per
// service: the environment → testcontainers (only when a Docker engine answers) → the project's own services
// (.services/env, written by `npm run services:up`). A service found nowhere is recorded as missing: a test that
// needs it then fails with a message saying how to start it.
//
// INBOXKIT_TESTCONTAINERS=0 never tries Docker; =1 reports why it could not be used.
import http from 'node:http';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import {
  ENV_VAR,
  SERVICE_NAMES,
  SERVICES_ENV_FILE,
  SERVICES_SCRIPT,
  answers,
  describeService,
  readServicesEnv,
  type DiscoveredServices,
  type ServiceName,
  type ServiceSource,
} from './discovery.js';

const log = (message: string) => console.log(`[services] ${message}`);

type Found = { value: string; source: ServiceSource; extra: Record<string, string> };

// vitest runs the global setup once per project (each package is a project), in one process: discover (and
// start containers) once, share the result, and stop the containers after the last project's teardown.
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
  const found = new Map<ServiceName, Found>();
  const missing: DiscoveredServices['missing'] = {};
  const tried: Partial<Record<ServiceName, string[]>> = {};
  // A setting given explicitly in the environment is never replaced by another server.
  const explicit = new Set<ServiceName>();
  const note = (name: ServiceName, what: string) => (tried[name] ??= []).push(what);

  // 1. The environment.
  await Promise.all(
    SERVICE_NAMES.map(async (name) => {
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
  let stopContainers: () => Promise<void> = async () => {};
  const wanted = SERVICE_NAMES.filter((name) => !found.has(name) && !explicit.has(name));
  if (wanted.length > 0) {
    const engine = await dockerEngine();
    if (engine.ok) {
      log(`Docker engine at ${engine.where}: starting ${wanted.join(', ')} with testcontainers`);
      const started = await startContainers(wanted);
      stopContainers = started.stop;
      for (const [name, value] of started.found)
        found.set(name, { value, source: 'testcontainers', extra: {} });
      for (const [name, reason] of started.failed) note(name, `testcontainers: ${reason}`);
    } else if (process.env['INBOXKIT_TESTCONTAINERS'] === '1') {
      log(`testcontainers not used: ${engine.where}`);
    }
  }

  // 3. The project's own services.
  const own = readServicesEnv();
  await Promise.all(
    SERVICE_NAMES.filter((name) => !found.has(name) && !explicit.has(name)).map(async (name) => {
      const value = own[ENV_VAR[name]];
      if (!value) {
        note(name, `no ${ENV_VAR[name]} in ${SERVICES_ENV_FILE}`);
      } else if (await answers(name, value)) {
        found.set(name, { value, source: 'services', extra: own });
      } else {
        note(name, `${ENV_VAR[name]}=${value} from .services/env does not answer (stopped?)`);
      }
    }),
  );

  const services: DiscoveredServices = { missing };
  for (const name of SERVICE_NAMES) {
    const hit = found.get(name);
    if (!hit) {
      missing[name] = (tried[name] ?? ['not found']).join('; ');
      continue;
    }
    // Each assignment is typed by its key; describeService returns the matching settings.
    if (name === 'postgres')
      services.postgres = describeService('postgres', hit.value, hit.source, hit.extra);
    if (name === 'kafka') services.kafka = describeService('kafka', hit.value, hit.source, hit.extra);
    if (name === 'rabbitmq')
      services.rabbitmq = describeService('rabbitmq', hit.value, hit.source, hit.extra);
    if (name === 'sqs') services.sqs = describeService('sqs', hit.value, hit.source, hit.extra);
    if (name === 'redis') services.redis = describeService('redis', hit.value, hit.source, hit.extra);
    // Code under test that reads the conventional variables (and child processes) sees the same servers.
    process.env[ENV_VAR[name]] ??= hit.value;
  }
  if ([...found.values()].some((f) => f.source === 'services') && existsSync(SERVICES_SCRIPT)) {
    services.servicesScript = own['INBOXKIT_SERVICES_SCRIPT'] || SERVICES_SCRIPT;
    process.env['INBOXKIT_SERVICES_SCRIPT'] ??= services.servicesScript;
    if (own['RABBITMQ_CTL']) process.env['RABBITMQ_CTL'] ??= own['RABBITMQ_CTL'];
  }
  if (services.sqs) {
    process.env['AWS_REGION'] ??= services.sqs.region;
    process.env['AWS_ACCESS_KEY_ID'] ??= services.sqs.credentials.accessKeyId;
    process.env['AWS_SECRET_ACCESS_KEY'] ??= services.sqs.credentials.secretAccessKey;
  }

  const summary = SERVICE_NAMES.map((name) => {
    const hit = found.get(name);
    return hit ? `${name} (${hit.source}: ${hit.value})` : `${name} MISSING`;
  }).join(', ');
  log(summary);
  if (Object.keys(missing).length > 0) {
    log(`tests that need a missing service will fail; start them with \`npm run services:up\``);
  }

  return { services, stop: stopContainers };
}

// --------------------------------------------------------------------------------------------- Docker

/** Does a Docker (or Podman) engine answer `/_ping` within a second or two? Never throws. */
async function dockerEngine(): Promise<{ ok: boolean; where: string }> {
  const setting = process.env['INBOXKIT_TESTCONTAINERS'];
  if (setting === '0' || setting === 'false' || setting === 'never') {
    return { ok: false, where: 'disabled by INBOXKIT_TESTCONTAINERS' };
  }
  const candidates: { socketPath?: string; host?: string; port?: number; label: string }[] = [];
  const dockerHost = process.env['DOCKER_HOST'];
  if (dockerHost?.startsWith('unix://')) {
    candidates.push({ socketPath: dockerHost.slice('unix://'.length), label: dockerHost });
  } else if (dockerHost?.startsWith('tcp://')) {
    const url = new URL(dockerHost);
    candidates.push({ host: url.hostname, port: Number(url.port || 2375), label: dockerHost });
  } else {
    const runtimeDir = process.env['XDG_RUNTIME_DIR'];
    for (const path of [
      '/var/run/docker.sock',
      join(homedir(), '.docker/run/docker.sock'),
      ...(runtimeDir ? [join(runtimeDir, 'docker.sock'), join(runtimeDir, 'podman/podman.sock')] : []),
    ]) {
      if (existsSync(path)) candidates.push({ socketPath: path, label: `unix://${path}` });
    }
  }
  if (candidates.length === 0) return { ok: false, where: 'no Docker socket and no DOCKER_HOST' };
  for (const candidate of candidates) {
    const ok = await new Promise<boolean>((resolvePromise) => {
      const request = http.get(
        {
          ...(candidate.socketPath
            ? { socketPath: candidate.socketPath }
            : { host: candidate.host, port: candidate.port }),
          path: '/_ping',
          timeout: 1500,
        },
        (response) => {
          response.resume();
          resolvePromise(response.statusCode === 200);
        },
      );
      request.on('timeout', () => request.destroy(new Error('timeout')));
      request.on('error', () => resolvePromise(false));
    });
    if (ok) return { ok: true, where: candidate.label };
  }
  return { ok: false, where: `no engine answered at ${candidates.map((c) => c.label).join(', ')}` };
}

function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolvePromise(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

async function startContainers(names: ServiceName[]): Promise<{
  found: Map<ServiceName, string>;
  failed: Map<ServiceName, string>;
  stop: () => Promise<void>;
}> {
  const { GenericContainer, Wait } = await import('testcontainers');
  type Started = Awaited<ReturnType<InstanceType<typeof GenericContainer>['start']>>;
  const started: Started[] = [];
  const found = new Map<ServiceName, string>();
  const failed = new Map<ServiceName, string>();

  const starters: Record<ServiceName, () => Promise<string>> = {
    postgres: async () => {
      const container = await new GenericContainer('postgres:15')
        .withEnvironment({ POSTGRES_PASSWORD: 'postgres', POSTGRES_DB: 'inboxkit' })
        .withCommand(['postgres', '-c', 'max_connections=300'])
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
        .start();
      started.push(container);
      return `postgres://postgres:postgres@${container.getHost()}:${container.getMappedPort(5432)}/inboxkit`;
    },
    kafka: async () => {
      // The broker advertises the address clients use, so the host port is chosen up front.
      const port = await freePort();
      const container = await new GenericContainer('apache/kafka:3.9.1')
        .withEnvironment({
          KAFKA_NODE_ID: '1',
          KAFKA_PROCESS_ROLES: 'broker,controller',
          KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
          KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${port}`,
          KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
          KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
          KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
          KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'true',
          KAFKA_NUM_PARTITIONS: '3',
          KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
          KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        })
        .withExposedPorts({ container: 9092, host: port })
        .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
        .start();
      started.push(container);
      return `127.0.0.1:${port}`;
    },
    rabbitmq: async () => {
      const container = await new GenericContainer('rabbitmq:3.13-management')
        .withExposedPorts(5672)
        .withWaitStrategy(Wait.forLogMessage(/Server startup complete/))
        .start();
      started.push(container);
      return `amqp://guest:guest@${container.getHost()}:${container.getMappedPort(5672)}`;
    },
    sqs: async () => {
      const port = await freePort();
      const config = [
        'include classpath("application.conf")',
        `node-address { protocol = http, host = localhost, port = ${port}, context-path = "" }`,
        'rest-sqs { enabled = true, bind-port = 9324, bind-hostname = "0.0.0.0", sqs-limits = strict }',
        'rest-stats { enabled = false }',
        'aws { region = us-east-1, accountId = 000000000000 }',
      ].join('\n');
      const container = await new GenericContainer('softwaremill/elasticmq-native')
        .withCopyContentToContainer([{ content: config, target: '/opt/elasticmq.conf' }])
        .withExposedPorts({ container: 9324, host: port })
        .withWaitStrategy(Wait.forLogMessage(/started in/))
        .start();
      started.push(container);
      return `http://${container.getHost()}:${port}`;
    },
    redis: async () => {
      const container = await new GenericContainer('redis:7')
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
        .start();
      started.push(container);
      return `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
    },
  };

  await Promise.all(
    names.map(async (name) => {
      try {
        found.set(name, await starters[name]());
      } catch (error) {
        failed.set(name, error instanceof Error ? error.message : String(error));
      }
    }),
  );
  return {
    found,
    failed,
    stop: async () => {
      await Promise.allSettled(started.map((container) => container.stop()));
    },
  };
}
