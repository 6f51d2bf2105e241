// Where the test broker is: AMQP_URL from the environment or from the services script's resolved settings
// (.services/env). A test that needs RabbitMQ fails with a clear message when it is not there; it never skips.

import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

function fromServicesEnv(name: string): string | undefined {
  const file = join(root, '.services', 'env');
  if (!existsSync(file)) return undefined;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^(?:export\s+)?([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m && m[1] === name) return m[2]!.replace(/^['"]|['"]$/g, '');
  }
  return undefined;
}

function setting(name: string, what: string): string {
  const value = process.env[name] ?? fromServicesEnv(name);
  if (value === undefined || value === '') {
    throw new Error(
      `${what} is not configured: start the services with \`npm run services:up\` (writes .services/env) or set ${name}`,
    );
  }
  return value;
}

/** The AMQP URL of the test RabbitMQ. */
export function amqpUrl(): string {
  return setting('AMQP_URL', 'RabbitMQ');
}

/** The Postgres URL of the test database. */
export function databaseUrl(): string {
  return setting('DATABASE_URL', 'Postgres');
}

/**
 * Restarts the shared RabbitMQ (stop, then start; resolves once it accepts connections again) through the
 * services script. Every connection to it drops, as in a real broker restart.
 */
export async function restartRabbitmq(): Promise<void> {
  const script = setting('INBOXKIT_SERVICES_SCRIPT', 'The services script');
  await promisify(execFile)('bash', [script, 'restart', 'rabbitmq'], { timeout: 120_000 });
}
