// The catalog of test services, shared by the vitest global setup, the test helpers and the example runner:
// for each service, the variable that names it, its name in scripts/services/services.sh, the endpoints that
// must answer and its typed settings. Discovery (test/support/find-services.ts) walks the catalog in order:
//   1. connection settings in the environment (DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, REDIS_URL,
//      NATS_URL);
//   2. a container started with testcontainers, when a Docker engine answers (skipped quickly without one);
//   3. the project's own services (`npm run services:up`), read from .services/env, and only while this
//      checkout's own process serves them (ownService): never whatever answers on a port that .services/env
//      names, such as another checkout's server that took it while ours was stopped;
//   4. else the project's own services, started for the run and stopped at its end.
// Each candidate must actually answer (a TCP connect) before it is used. No port is ever probed on a guess.
//
// Adding a service: its settings type in ServiceMap, its name in SERVICE_NAMES, one CATALOG entry, a container in
// test-containers.ts and its section in scripts/services/services.sh.
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where services.sh keeps its state (INBOXKIT_SERVICES_DIR, as for the script). */
export const SERVICES_DIR = process.env['INBOXKIT_SERVICES_DIR'] || resolve(REPO_ROOT, '.services');
export const SERVICES_ENV_FILE = resolve(SERVICES_DIR, 'env');
export const SERVICES_SCRIPT = resolve(REPO_ROOT, 'scripts/services/services.sh');

/**
 * Where a service came from. Only `services` (the project's own, running before the run or started for it) can be
 * restarted by tests.
 */
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

export interface NatsService {
  source: ServiceSource;
  /** nats://host:port (a JetStream-enabled server) */
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
  nats: NatsService;
}

export type ServiceName = keyof ServiceMap;
export const SERVICE_NAMES: readonly ServiceName[] = [
  'postgres',
  'kafka',
  'rabbitmq',
  'sqs',
  'redis',
  'nats',
];

interface Endpoint {
  host: string;
  port: number;
}

interface CatalogEntry<N extends ServiceName> {
  /** The variable that holds its connection string, in the environment and in .services/env. */
  envVar: string;
  /** Its name for scripts/services/services.sh (up, down, restart). */
  script: string;
  /** Where services.sh keeps the pid of its process, relative to the state folder (first line: the pid). */
  pidFile: string;
  /** The endpoints its connection string names. */
  endpoints: (value: string) => Endpoint[];
  /** Whether one answering endpoint is enough (a Kafka bootstrap list) or all must answer. */
  anyEndpoint?: boolean;
  /** Its typed settings, from the connection string and the other variables of the same source. */
  describe: (value: string, source: ServiceSource, extra: Record<string, string>) => ServiceMap[N];
}

export const CATALOG: { readonly [N in ServiceName]: CatalogEntry<N> } = {
  postgres: {
    envVar: 'DATABASE_URL',
    script: 'postgres',
    pidFile: 'postgres/data/postmaster.pid',
    endpoints: (value) => [hostPort(value, 5432)],
    describe: (value, source) => {
      const url = new URL(value);
      return {
        source,
        url: value,
        host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
        port: defaultPortOf(url, 5432),
        database: decodeURIComponent(url.pathname.replace(/^\//, '')) || 'postgres',
        user: decodeURIComponent(url.username) || 'postgres',
      };
    },
  },
  kafka: {
    envVar: 'KAFKA_BROKERS',
    script: 'kafka',
    pidFile: 'run/kafka.pid',
    endpoints: (value) => brokerList(value).map((b) => hostPort(b, 9092)),
    anyEndpoint: true,
    describe: (value, source) => ({ source, brokers: brokerList(value) }),
  },
  rabbitmq: {
    envVar: 'AMQP_URL',
    script: 'rabbitmq',
    pidFile: 'run/rabbitmq.pid',
    endpoints: (value) => [hostPort(value, value.startsWith('amqps:') ? 5671 : 5672)],
    describe: (value, source, extra) => {
      const url = new URL(value);
      const service: RabbitMqService = {
        source,
        url: value,
        host: url.hostname || '127.0.0.1',
        port: defaultPortOf(url, 5672),
      };
      if (extra['RABBITMQ_CTL']) service.ctl = extra['RABBITMQ_CTL'];
      return service;
    },
  },
  sqs: {
    envVar: 'SQS_ENDPOINT',
    script: 'elasticmq',
    pidFile: 'run/elasticmq.pid',
    endpoints: (value) => [hostPort(value, value.startsWith('https:') ? 443 : 80)],
    describe: (value, source, extra) => ({
      source,
      endpoint: value.replace(/\/+$/, ''),
      region: extra['SQS_REGION'] || extra['AWS_REGION'] || 'us-east-1',
      credentials: {
        accessKeyId: extra['AWS_ACCESS_KEY_ID'] || 'test',
        secretAccessKey: extra['AWS_SECRET_ACCESS_KEY'] || 'test',
      },
    }),
  },
  redis: {
    envVar: 'REDIS_URL',
    script: 'redis',
    pidFile: 'run/redis.pid',
    endpoints: (value) => [hostPort(value, 6379)],
    describe: (value, source) => {
      const url = new URL(value);
      return { source, url: value, host: url.hostname || '127.0.0.1', port: defaultPortOf(url, 6379) };
    },
  },
  nats: {
    envVar: 'NATS_URL',
    script: 'nats',
    pidFile: 'run/nats.pid',
    endpoints: (value) => [hostPort(value, 4222)],
    describe: (value, source) => {
      const url = new URL(value);
      return { source, url: value, host: url.hostname || '127.0.0.1', port: defaultPortOf(url, 4222) };
    },
  },
};

/** The connection-string variable of each service (DATABASE_URL, ...). */
export const ENV_VAR = Object.fromEntries(
  SERVICE_NAMES.map((name) => [name, CATALOG[name].envVar]),
) as Record<ServiceName, string>;

/** What the global setup provides to every test: the services found, and why the others are missing. */
export type DiscoveredServices = { [N in ServiceName]?: ServiceMap[N] } & {
  /** Per missing service, what was tried. */
  missing: Partial<Record<ServiceName, string>>;
  /** scripts/services/services.sh of this checkout when the own services are in use (for restarts). */
  servicesScript?: string;
};

// `inject('services')` is typed everywhere this module is compiled (test/support/services.ts imports it, so
// any package whose tests use the helpers sees the augmentation).
declare module 'vitest' {
  export interface ProvidedContext {
    services: DiscoveredServices;
  }
}

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

function brokerList(value: string): string[] {
  return value
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
}

function hostPort(address: string, defaultPort: number): Endpoint {
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
  return CATALOG[name].describe(value, source, extra);
}

/** The host:port endpoints a service must answer on. */
export function endpointsOf(name: ServiceName, value: string): Endpoint[] {
  return CATALOG[name].endpoints(value);
}

/**
 * Whether `value` (a connection string from .services/env) is served by this checkout's own process of service
 * `name`: its pid file in the state folder `dir` names a live process, and (on Linux, where /proc tells) that
 * process listens on every port `value` names. False for a server that merely answers there — another
 * checkout's, which took the port while ours was stopped, or anything else. Where /proc cannot tell (another
 * system, or a process this user may not inspect), the live pid file alone decides.
 *
 * @example ownService('redis', 'redis://127.0.0.1:16379') // true while .services/run/redis.pid runs it
 */
export function ownService(name: ServiceName, value: string, dir = SERVICES_DIR): boolean {
  const pid = readPid(resolve(dir, CATALOG[name].pidFile));
  if (pid === undefined || !processAlive(pid)) return false;
  const ports = endpointsOf(name, value).map((e) => e.port);
  if (ports.length === 0) return false;
  const listening = listeningSockets();
  if (listening === undefined) return true;
  const held = socketsOf(pid);
  if (held === undefined) return true;
  return ports.every((port) => [...(listening.get(port) ?? [])].some((inode) => held.has(inode)));
}

function readPid(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]?.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Listening TCP sockets by local port (their inodes), from /proc/net/tcp and tcp6; undefined without /proc. */
function listeningSockets(): Map<number, Set<string>> | undefined {
  const sockets = new Map<number, Set<string>>();
  let readAny = false;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
      readAny = true;
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // sl local_address rem_address st ... inode (10th field); st 0A is LISTEN.
      if (fields.length < 10 || fields[3] !== '0A') continue;
      const port = parseInt(fields[1]!.split(':')[1] ?? '', 16);
      const inode = fields[9]!;
      if (!sockets.has(port)) sockets.set(port, new Set());
      sockets.get(port)!.add(inode);
    }
  }
  return readAny ? sockets : undefined;
}

/** The socket inodes a process holds open; undefined when its descriptors cannot be read. */
function socketsOf(pid: number): Set<string> | undefined {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return undefined;
  }
  const inodes = new Set<string>();
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match?.[1]) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

export async function answers(name: ServiceName, value: string): Promise<boolean> {
  const endpoints = endpointsOf(name, value);
  if (endpoints.length === 0) return false;
  const results = await Promise.all(endpoints.map((e) => tcpAnswers(e.host, e.port)));
  return CATALOG[name].anyEndpoint ? results.some(Boolean) : results.every(Boolean);
}

/** Records the settings of one service in a DiscoveredServices (typed by its name). */
export function setService<N extends ServiceName>(
  services: DiscoveredServices,
  name: N,
  service: ServiceMap[N],
): void {
  (services as { [K in ServiceName]?: ServiceMap[K] })[name] = service;
}

/** The message a test gets when it needs a service that was not found. */
export function howToStart(name: ServiceName, detail?: string): string {
  const variable = ENV_VAR[name];
  return (
    `The ${name} service is not available${detail ? ` (${detail})` : ''}. ` +
    `\`npm test\` starts the project's own services when it finds none (unless INBOXKIT_START_SERVICES=0); ` +
    `or start them with \`npm run services:up\`, set ${variable} to a running server, or run a Docker engine ` +
    `for testcontainers.`
  );
}
