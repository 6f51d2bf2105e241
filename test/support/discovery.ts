// Service discovery shared by the vitest global setup and the test helpers. For each service, in order:
//   1. connection settings in the environment (DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, REDIS_URL);
//   2. a container started with testcontainers, when a Docker engine answers (skipped quickly without one);
//   3. the project's own services (`npm run services:up`), read from .services/env.
// Each candidate must actually answer (a TCP connect) before it is used.
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const SERVICES_ENV_FILE = resolve(REPO_ROOT, '.services/env');
export const SERVICES_SCRIPT = resolve(REPO_ROOT, 'scripts/services/services.sh');

export type ServiceName = 'postgres' | 'kafka' | 'rabbitmq' | 'sqs' | 'redis';
export const SERVICE_NAMES: readonly ServiceName[] = ['postgres', 'kafka', 'rabbitmq', 'sqs', 'redis'];

/** Where a service came from. Only `services` (the project's own) can be restarted by tests. */
export type ServiceSource = 'env' | 'testcontainers' | 'services';

export interface PostgresService {
  source: ServiceSource;
  /** postgres://user[:password]@host:port/database */
  url: string;
  host: string;
  port: number;
  database: string;
  user: string;
}

export interface KafkaService {
  source: ServiceSource;
  brokers: string[];
}

export interface RabbitMqService {
  source: ServiceSource;
  /** amqp://user:password@host:port[/vhost] */
  url: string;
  host: string;
  port: number;
  /** A rabbitmqctl bound to this node (own services only). */
  ctl?: string;
}

export interface SqsService {
  source: ServiceSource;
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
}

export interface RedisService {
  source: ServiceSource;
  /** redis://host:port */
  url: string;
  host: string;
  port: number;
}

export interface ServiceMap {
  postgres: PostgresService;
  kafka: KafkaService;
  rabbitmq: RabbitMqService;
  sqs: SqsService;
  redis: RedisService;
}

/** What the global setup provides to every test: the services found, and why the others are missing. */
export interface DiscoveredServices {
  postgres?: PostgresService;
  kafka?: KafkaService;
  rabbitmq?: RabbitMqService;
  sqs?: SqsService;
  redis?: RedisService;
  /** Per missing service, what was tried. */
  missing: Partial<Record<ServiceName, string>>;
  /** scripts/services/services.sh of this checkout when the own services are in use (for restarts). */
  servicesScript?: string;
}

// `inject('services')` is typed everywhere this module is compiled (test/support/services.ts imports it, so
// any package whose tests use the helpers sees the augmentation).
declare module 'vitest' {
  export interface ProvidedContext {
    services: DiscoveredServices;
  }
}

export const ENV_VAR: Record<ServiceName, string> = {
  postgres: 'DATABASE_URL',
  kafka: 'KAFKA_BROKERS',
  rabbitmq: 'AMQP_URL',
  sqs: 'SQS_ENDPOINT',
  redis: 'REDIS_URL',
};

/** Parses .services/env (KEY=value lines, optional quotes, # comments). */
export function readServicesEnv(file = SERVICES_ENV_FILE): Record<string, string> {
  if (!existsSync(file)) return {};
  const values: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!match?.[1]) continue;
    let value = (match[2] ?? '').trim();
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0])) {
      value = value.slice(1, -1);
    }
    values[match[1]] = value;
  }
  return values;
}

/** Opens and closes a TCP connection; true when it opened within the timeout. */
export function tcpAnswers(host: string, port: number, timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolvePromise(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function hostPort(address: string, defaultPort: number): { host: string; port: number } {
  const url = new URL(address.includes('://') ? address : `tcp://${address}`);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
  return { host, port: url.port ? Number(url.port) : defaultPort };
}

function defaultPortOf(url: URL, fallback: number): number {
  if (url.port) return Number(url.port);
  if (url.protocol === 'https:') return 443;
  if (url.protocol === 'http:') return 80;
  if (url.protocol === 'amqps:') return 5671;
  return fallback;
}

/** Builds the typed settings of a service from its connection string (DATABASE_URL etc.). */
export function describeService<N extends ServiceName>(
  name: N,
  value: string,
  source: ServiceSource,
  extra: Record<string, string> = {},
): ServiceMap[N] {
  switch (name) {
    case 'postgres': {
      const url = new URL(value);
      const service: PostgresService = {
        source,
        url: value,
        host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
        port: defaultPortOf(url, 5432),
        database: decodeURIComponent(url.pathname.replace(/^\//, '')) || 'postgres',
        user: decodeURIComponent(url.username) || 'postgres',
      };
      return service as ServiceMap[N];
    }
    case 'kafka': {
      const service: KafkaService = {
        source,
        brokers: value
          .split(',')
          .map((b) => b.trim())
          .filter(Boolean),
      };
      return service as ServiceMap[N];
    }
    case 'rabbitmq': {
      const url = new URL(value);
      const service: RabbitMqService = {
        source,
        url: value,
        host: url.hostname || '127.0.0.1',
        port: defaultPortOf(url, 5672),
      };
      if (extra['RABBITMQ_CTL']) service.ctl = extra['RABBITMQ_CTL'];
      return service as ServiceMap[N];
    }
    case 'sqs': {
      const service: SqsService = {
        source,
        endpoint: value.replace(/\/+$/, ''),
        region: extra['SQS_REGION'] || extra['AWS_REGION'] || 'us-east-1',
        credentials: {
          accessKeyId: extra['AWS_ACCESS_KEY_ID'] || 'test',
          secretAccessKey: extra['AWS_SECRET_ACCESS_KEY'] || 'test',
        },
      };
      return service as ServiceMap[N];
    }
    case 'redis': {
      const url = new URL(value);
      const service: RedisService = {
        source,
        url: value,
        host: url.hostname || '127.0.0.1',
        port: defaultPortOf(url, 6379),
      };
      return service as ServiceMap[N];
    }
  }
  throw new Error(`unknown service ${String(name)}`);
}

/** The host:port endpoints a service must answer on. */
export function endpointsOf(name: ServiceName, value: string): { host: string; port: number }[] {
  switch (name) {
    case 'postgres':
      return [hostPort(value, 5432)];
    case 'kafka':
      return value
        .split(',')
        .map((b) => b.trim())
        .filter(Boolean)
        .map((b) => hostPort(b, 9092));
    case 'rabbitmq':
      return [hostPort(value, value.startsWith('amqps:') ? 5671 : 5672)];
    case 'sqs':
      return [hostPort(value, value.startsWith('https:') ? 443 : 80)];
    case 'redis':
      return [hostPort(value, 6379)];
  }
}

export async function answers(name: ServiceName, value: string): Promise<boolean> {
  const endpoints = endpointsOf(name, value);
  if (endpoints.length === 0) return false;
  // Kafka: one live bootstrap broker is enough.
  const results = await Promise.all(endpoints.map((e) => tcpAnswers(e.host, e.port)));
  return name === 'kafka' ? results.some(Boolean) : results.every(Boolean);
}

/** The message a test gets when it needs a service that was not found. */
export function howToStart(name: ServiceName, detail?: string): string {
  const variable = ENV_VAR[name];
  return (
    `The ${name} service is not available${detail ? ` (${detail})` : ''}. ` +
    `Start the project's services with \`npm run services:up\` (scripts/services/services.sh), ` +
    `or set ${variable} to a running server, or run a Docker engine for testcontainers.`
  );
}
