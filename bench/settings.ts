// Connection settings for the bench scripts: the environment first, then .services/env (written by
// `npm run services:up`), the same order the tests use.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));

export function setting(name: string, fallback?: string): string {
  const fromEnv = process.env[name];
  if (fromEnv) return fromEnv;
  const file = `${REPO_ROOT}.services/env`;
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line.startsWith(`${name}=`)) return line.slice(name.length + 1).trim();
    }
  }
  if (fallback !== undefined) return fallback;
  throw new Error(
    `${name} is not set: start the services with \`npm run services:up\` (writes .services/env) or set it`,
  );
}

/** Where pgbench and friends live. */
export function postgresBin(): string {
  return setting('INBOXKIT_PG_BIN', '/usr/lib/postgresql/15/bin');
}

/** Percentile of a sorted array (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** The line a section script prints last: its figures as JSON, for the runner. */
export const RESULT_PREFIX = 'BENCH_RESULT ';

export function printResult(result: unknown): void {
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`);
}
