// Where the real services are, for `npm run demo -- --transport kafka|rabbitmq|sqs`: the environment first
// (DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, SQS_REGION), then `.services/env`, which
// `npm run services:up` writes. A TCP probe tells "not running" from a slow start before any client retries.

import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

import type { TransportName } from './demo-transport.js';

/** Connection settings of the real services. */
export interface ServiceSettings {
  readonly databaseUrl?: string | undefined;
  readonly kafkaBrokers?: readonly string[] | undefined;
  readonly amqpUrl?: string | undefined;
  readonly natsUrl?: string | undefined;
  readonly sqs?:
    | {
        readonly endpoint: string;
        readonly region: string;
        readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
      }
    | undefined;
}

const SERVICES_ENV = fileURLToPath(new URL('../../../.services/env', import.meta.url));

function readServicesEnv(): Record<string, string> {
  if (!existsSync(SERVICES_ENV)) return {};
  const values: Record<string, string> = {};
  for (const line of readFileSync(SERVICES_ENV, 'utf8').split('\n')) {
    const match = /^(?:export\s+)?([A-Z_]+)=["']?(.*?)["']?$/.exec(line.trim());
    if (match !== null) values[match[1]!] = match[2]!;
  }
  return values;
}

/** Reads the settings from the environment, then from `.services/env`. */
export function serviceSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): ServiceSettings {
  const file = readServicesEnv();
  const get = (name: string): string | undefined =>
    env[name] !== undefined && env[name] !== '' ? env[name] : file[name];
  const brokers = get('KAFKA_BROKERS');
  const endpoint = get('SQS_ENDPOINT');
  return {
    databaseUrl: get('DATABASE_URL'),
    kafkaBrokers: brokers
      ?.split(',')
      .map((b) => b.trim())
      .filter((b) => b !== ''),
    amqpUrl: get('AMQP_URL'),
    natsUrl: get('NATS_URL'),
    sqs:
      endpoint === undefined
        ? undefined
        : {
            endpoint,
            region: get('SQS_REGION') ?? get('AWS_REGION') ?? 'us-east-1',
            credentials: {
              accessKeyId: get('AWS_ACCESS_KEY_ID') ?? 'inboxkit',
              secretAccessKey: get('AWS_SECRET_ACCESS_KEY') ?? 'inboxkit',
            },
          },
  };
}

/** A service the run cannot do without, and why it is not there. */
export class ServiceUnavailableError extends Error {
  override readonly name = 'ServiceUnavailableError';
}

function hostPort(address: string, defaultPort: number): { host: string; port: number } {
  if (/^[a-z]+:\/\//i.test(address)) {
    const url = new URL(address);
    return { host: url.hostname, port: Number(url.port || defaultPort) };
  }
  const [host, port] = address.split(':');
  return { host: host ?? 'localhost', port: Number(port ?? defaultPort) };
}

function probe(host: string, port: number, timeoutMs = 2_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (problem: string | undefined): void => {
      socket.destroy();
      resolve(problem);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs} ms`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
}

const START_HINT =
  'start the services with `npm run services:up` (or set DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, NATS_URL)';

/**
 * Checks that Postgres and the transport's broker are configured and accept connections. Throws a
 * `ServiceUnavailableError` that says which one is missing and how to start it.
 */
export async function checkServices(transport: TransportName, settings: ServiceSettings): Promise<void> {
  if (transport === 'learning') return;
  const needed: { name: string; variable: string; address: string | undefined; port: number }[] = [
    { name: 'Postgres', variable: 'DATABASE_URL', address: settings.databaseUrl, port: 5432 },
  ];
  if (transport === 'kafka')
    needed.push({
      name: 'Kafka',
      variable: 'KAFKA_BROKERS',
      address: settings.kafkaBrokers?.[0],
      port: 9092,
    });
  if (transport === 'rabbitmq')
    needed.push({ name: 'RabbitMQ', variable: 'AMQP_URL', address: settings.amqpUrl, port: 5672 });
  if (transport === 'sqs')
    needed.push({ name: 'SQS', variable: 'SQS_ENDPOINT', address: settings.sqs?.endpoint, port: 9324 });
  if (transport === 'nats')
    needed.push({ name: 'NATS', variable: 'NATS_URL', address: settings.natsUrl, port: 4222 });
  const problems: string[] = [];
  await Promise.all(
    needed.map(async (service) => {
      if (service.address === undefined) {
        problems.push(`${service.name} is not configured (no ${service.variable}, no .services/env)`);
        return;
      }
      const { host, port } = hostPort(service.address, service.port);
      const problem = await probe(host, port);
      if (problem !== undefined)
        problems.push(`${service.name} is not reachable at ${host}:${port} (${problem})`);
    }),
  );
  if (problems.length > 0) {
    throw new ServiceUnavailableError(
      `${problems.join('\n')}\n\nThe ${transport} demo needs real services: ${START_HINT}.`,
    );
  }
}
