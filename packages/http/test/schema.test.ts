// The idempotency-key schema and configuration: the generated SQL file, identifiers, bad options.

import { readFileSync } from 'node:fs';
import { ConfigurationError } from '@inboxkit/core';
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { httpSqlFile, SQL_FILE } from '../scripts/generate-sql.js';
import { idempotencyKeys, idempotencyKeySchemaSql, resolveIdempotencyKeyTableNames } from '../src/index.js';

describe('idempotency-key schema', () => {
  it('keeps migrations/0003_http.sql in step with its source (run packages/http/scripts/generate-sql.ts)', () => {
    expect(readFileSync(SQL_FILE, 'utf8')).toBe(httpSqlFile());
  });

  it('quotes every identifier and refuses anything but plain names', () => {
    const text = idempotencyKeySchemaSql(resolveIdempotencyKeyTableNames({ schema: 'app', table: 'keys' }));
    expect(text).toContain('CREATE TABLE IF NOT EXISTS "app"."keys"');
    expect(text).toContain('"keys_expires_at_idx"');
    expect(() => resolveIdempotencyKeyTableNames({ table: 'x; DROP TABLE users' })).toThrow(
      ConfigurationError,
    );
  });

  it('refuses bad configuration with a ConfigurationError', () => {
    const db = {} as Kysely<unknown>;
    const principal = () => 'p';
    expect(() => idempotencyKeys({ db, principal: undefined as unknown as () => string })).toThrow(
      /principal must be a function/,
    );
    expect(() => idempotencyKeys({ db, principal, leaseMs: 0 })).toThrow(ConfigurationError);
    expect(() => idempotencyKeys({ db, principal, leaseMs: 10_000, retentionMs: 5_000 })).toThrow(
      /longer than leaseMs/,
    );
    expect(() => idempotencyKeys({ db, principal, maxResponseBytes: -1 })).toThrow(/maxResponseBytes/);
    expect(() => idempotencyKeys({ principal })).toThrow(/either db \(a Kysely instance\) or seam/);
  });
});
