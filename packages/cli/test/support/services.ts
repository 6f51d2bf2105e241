// Where the test services are: each setting from the environment, else from `.services/env` (written by
// `npm run services:up`). A test that needs a service fails with a clear message when it is missing; it never
// skips.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

function fromServicesEnv(name: string): string | undefined {
  const file = resolve(repoRoot, '.services/env');
  if (!existsSync(file)) return undefined;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const match = /^(?:export\s+)?([A-Z_]+)=["']?(.*?)["']?$/.exec(line.trim());
    if (match?.[1] === name) return match[2];
  }
  return undefined;
}

/** The setting of a service the test needs. */
export function requireService(name: 'DATABASE_URL' | 'KAFKA_BROKERS' | 'AMQP_URL' | 'SQS_ENDPOINT'): string {
  const value = process.env[name] ?? fromServicesEnv(name);
  if (value === undefined || value === '') {
    throw new Error(`${name} is not set and .services/env has none: start the test services with \`npm run services:up\``);
  }
  return value;
}

/** The repository root (for running the bin). */
export const REPO_ROOT = repoRoot;
