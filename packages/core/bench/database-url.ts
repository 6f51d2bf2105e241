// Where core's bench scripts find Postgres: `--url`, then DATABASE_URL, then .services/env (written by
// `npm run services:up`).

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function databaseUrl(override?: string): string {
  if (override) return override;
  if (process.env['DATABASE_URL']) return process.env['DATABASE_URL'];
  const envFile = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  if (existsSync(envFile)) {
    const line = readFileSync(envFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('DATABASE_URL='));
    if (line) return line.slice('DATABASE_URL='.length).trim();
  }
  throw new Error('no Postgres: start it with `npm run services:up` or set DATABASE_URL');
}
