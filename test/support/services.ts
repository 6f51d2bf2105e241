// Helpers for tests that need real services. The global setup (test/support/global-setup.ts) has found them;
// these helpers hand them out, and fail — never skip — when one is missing:
//
//   const pg = requireService('postgres');          // { url, host, port, database, user, source }
//   const db = await createTestSchema();             // isolated schema + pg.Pool; await db.cleanup() in afterAll
//   const topic = uniqueTestName('orders');          // for topics, queues, consumer groups
//   await restartService('kafka');                   // chaos tests: restart the broker, wait until ready
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import { inject } from 'vitest';
import {
  CATALOG,
  ENV_VAR,
  SERVICE_NAMES,
  describeService,
  howToStart,
  readServicesEnv,
  setService,
  type DiscoveredServices,
  type ServiceMap,
  type ServiceName,
} from './discovery.js';

export type {
  DiscoveredServices,
  KafkaService,
  PostgresService,
  RabbitMqService,
  ServiceMap,
  ServiceName,
  SqsService,
  RedisService,
  NatsService,
} from './discovery.js';

const execFileAsync = promisify(execFile);

/** Everything the global setup found (outside vitest: the environment, else .services/env). */
export function discoveredServices(): DiscoveredServices {
  try {
    return inject('services');
  } catch {
    // Not inside a vitest worker (a script, a REPL): read the same sources directly, without probing.
    const own = readServicesEnv();
    const services: DiscoveredServices = { missing: {} };
    for (const name of SERVICE_NAMES) {
      const fromEnv = process.env[ENV_VAR[name]];
      const value = fromEnv || own[ENV_VAR[name]];
      if (!value) {
        services.missing[name] = `no ${ENV_VAR[name]}`;
        continue;
      }
      const source = fromEnv ? 'env' : 'services';
      const extra = fromEnv ? (process.env as Record<string, string>) : own;
      setService(services, name, describeService(name, value, source, extra));
    }
    if (own['INBOXKIT_SERVICES_SCRIPT']) services.servicesScript = own['INBOXKIT_SERVICES_SCRIPT'];
    return services;
  }
}

/**
 * The connection settings of a service, or an Error that says how to start it. Call it in the test (or in a
 * beforeAll): a missing service then fails the test instead of skipping it.
 */
export function requireService<N extends ServiceName>(name: N): ServiceMap[N] {
  const services = discoveredServices();
  const service = services[name] as ServiceMap[N] | undefined;
  if (!service) throw new Error(howToStart(name, services.missing[name]));
  return service;
}

/** Whether a service is available (for tests that adapt, e.g. report which transports they covered). */
export function hasService(name: ServiceName): boolean {
  return discoveredServices()[name] !== undefined;
}

/**
 * Restarts a service (stop, start, wait until it is ready again) through scripts/services/services.sh. Only the
 * project's own services can be restarted; a test that needs this fails clearly elsewhere.
 */
export async function restartService(name: ServiceName, options: { timeoutMs?: number } = {}): Promise<void> {
  const service = requireService(name);
  const script = discoveredServices().servicesScript ?? process.env['INBOXKIT_SERVICES_SCRIPT'];
  if (service.source !== 'services' || !script) {
    throw new Error(
      `restartService('${name}') needs the project's own services (npm run services:up); ` +
        `this run uses ${name} from ${service.source}.`,
    );
  }
  try {
    await execFileAsync('bash', [script, 'restart', CATALOG[name].script], {
      timeout: options.timeoutMs ?? 180_000,
      maxBuffer: 4 * 1024 * 1024,
    });
  } catch (error) {
    const e = error as { stderr?: string; message?: string };
    throw new Error(`restarting ${name} failed: ${e.stderr?.trim() || e.message}`, { cause: error });
  }
}

/** Stops a service (for tests of behaviour while a broker is down). Restart it with restartService. */
export async function stopService(name: ServiceName): Promise<void> {
  const service = requireService(name);
  const script = discoveredServices().servicesScript ?? process.env['INBOXKIT_SERVICES_SCRIPT'];
  if (service.source !== 'services' || !script) {
    throw new Error(`stopService('${name}') needs the project's own services (npm run services:up).`);
  }
  await execFileAsync('bash', [script, 'down', CATALOG[name].script], { timeout: 120_000 });
}

/**
 * A name unique to this test run, safe for Kafka topics and groups, RabbitMQ queues and SQS queues
 * (lower-case letters, digits and dashes, at most 80 characters).
 */
export function uniqueTestName(prefix = 'test'): string {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 50) || 'test';
  return `${clean}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

export interface TestSchema {
  /** The schema, created empty; the pool's search_path points at it (then public). */
  schema: string;
  /** A pool whose connections use the schema. */
  pool: pg.Pool;
  /** A connection string with the same search_path, for code that opens its own connections. */
  connectionString: string;
  /** Drops the schema (cascade) and ends the pool. */
  cleanup: () => Promise<void>;
}

/** A fresh schema in the test database, with a pool bound to it: each test file gets its own tables. */
export async function createTestSchema(prefix = 't', poolConfig: pg.PoolConfig = {}): Promise<TestSchema> {
  const { url } = requireService('postgres');
  const schema = uniqueTestName(prefix).replace(/-/g, '_').slice(0, 60);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create schema "${schema}"`);
  } finally {
    await admin.end();
  }
  const options = `-c search_path=${schema},public`;
  const connection = new URL(url);
  connection.searchParams.set('options', options);
  const pool = new pg.Pool({ connectionString: url, options, max: 10, ...poolConfig });
  return {
    schema,
    pool,
    connectionString: connection.toString(),
    cleanup: async () => {
      await pool.end().catch(() => {});
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`drop schema if exists "${schema}" cascade`);
      } finally {
        await client.end();
      }
    },
  };
}

export interface TestDatabase {
  database: string;
  /** A connection string for the new database. */
  url: string;
  pool: pg.Pool;
  /** Ends the pool and drops the database (forcing out any connection left open). */
  cleanup: () => Promise<void>;
}

/** A fresh database (for tests that need a whole database: migrations with fixed schema names, roles, ...). */
export async function createTestDatabase(
  prefix = 'inboxkit_t',
  poolConfig: pg.PoolConfig = {},
): Promise<TestDatabase> {
  const { url } = requireService('postgres');
  const database = uniqueTestName(prefix).replace(/-/g, '_').slice(0, 60);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create database "${database}"`);
  } finally {
    await admin.end();
  }
  const target = new URL(url);
  target.pathname = `/${database}`;
  const pool = new pg.Pool({ connectionString: target.toString(), max: 10, ...poolConfig });
  return {
    database,
    url: target.toString(),
    pool,
    cleanup: async () => {
      await pool.end().catch(() => {});
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`drop database if exists "${database}" with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}
