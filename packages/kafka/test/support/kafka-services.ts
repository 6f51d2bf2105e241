// Where the test broker is: KAFKA_BROKERS from the environment or from .services/env (written by
// `npm run services:up`). A missing broker fails the test with a clear message, never skips it.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const envFile = fileURLToPath(new URL('../../../../.services/env', import.meta.url));

function fromEnvFile(name: string): string | undefined {
  if (!existsSync(envFile)) return undefined;
  for (const line of readFileSync(envFile, 'utf8').split('\n')) {
    const match = /^(?:export\s+)?([A-Z_]+)=(.*)$/.exec(line.trim());
    if (match?.[1] === name) return match[2]!.replace(/^['"]|['"]$/g, '');
  }
  return undefined;
}

function setting(name: string, service: string): string {
  const value = process.env[name] ?? fromEnvFile(name);
  if (value === undefined || value === '') {
    throw new Error(`${service} is not configured: run \`npm run services:up\` (writes .services/env) or set ${name}`);
  }
  return value;
}

/** The broker list, or an error saying how to start the services. */
export function kafkaBrokers(): string[] {
  return setting('KAFKA_BROKERS', 'Kafka')
    .split(',')
    .map((b) => b.trim());
}

/** The Postgres URL, or an error saying how to start the services. */
export function databaseUrl(): string {
  return setting('DATABASE_URL', 'Postgres');
}

/** The services script, for chaos tests (`restart kafka`). */
export function servicesScript(): string {
  return process.env.INBOXKIT_SERVICES_SCRIPT ?? fromEnvFile('INBOXKIT_SERVICES_SCRIPT') ?? fileURLToPath(new URL('../../../../scripts/services/services.sh', import.meta.url));
}
