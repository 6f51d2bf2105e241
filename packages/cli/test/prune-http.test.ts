// `inboxkit prune --target http|all` (and `--http`) against the real Postgres: the HTTP idempotency keys of
// @inboxkit/http are pruned through the same command as the inbox, with the same flags; `--target inbox`
// (the default) is unchanged.

import { migrateIdempotencyKeys } from '@inboxkit/http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { parseCommandLine } from '../src/command-line.js';
import { runCli } from '../src/run-cli.js';
import { UsageError } from '../src/usage-error.js';
import { captureIo } from './support/capture-io.js';
import { inboxDatabase } from './support/inbox-database.js';
import type { InboxDatabase } from './support/inbox-database.js';
import { requireService } from './support/services.js';

let database: InboxDatabase;
const dbArgs = (): string[] => [
  '--database-url',
  requireService('DATABASE_URL'),
  '--schema',
  database.schema,
];

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = captureIo({ env: {} });
  const code = await runCli(argv, io.io);
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

/** Keys of a table, sorted. */
async function keys(table: string): Promise<string[]> {
  const { rows } = await sql<{ k: string }>`select idempotency_key as k from ${sql.table(
    `${database.schema}.${table}`,
  )} order by 1`.execute(database.db);
  return rows.map((r) => r.k);
}

/** Inserts keys: `old-*` expired, `live-*` within retention, `busy-*` expired but under a live lease. */
async function seedKeys(table: string, prefix: string): Promise<void> {
  const t = sql.table(`${database.schema}.${table}`);
  await sql`insert into ${t} (principal, method, route, idempotency_key, fingerprint, status, lease_token, locked_until, expires_at) values
    ('alice', 'POST', '/payments', ${`${prefix}old-1`},  'f', 'completed',  null, null, now() - interval '1 hour'),
    ('alice', 'POST', '/payments', ${`${prefix}old-2`},  'f', 'released',   null, null, now() - interval '1 hour'),
    ('bob',   'POST', '/payments', ${`${prefix}old-3`},  'f', 'completed',  null, null, now() - interval '1 minute'),
    ('alice', 'POST', '/payments', ${`${prefix}live-1`}, 'f', 'completed',  null, null, now() + interval '20 hours'),
    ('alice', 'POST', '/payments', ${`${prefix}busy-1`}, 'f', 'processing', gen_random_uuid(), now() + interval '1 minute', now() - interval '1 minute')`.execute(
    database.db,
  );
}

beforeAll(async () => {
  database = await inboxDatabase();
  await migrateIdempotencyKeys(database.db, { schema: database.schema });
  // A second key table in the same schema needs its own migration table (one per table).
  await migrateIdempotencyKeys(database.db, {
    schema: database.schema,
    table: 'api_keys',
    migrationTable: 'api_keys_migrations',
  });
  await sql`insert into ${sql.table(`${database.schema}.inbox`)} (consumer, message_id, status, attempts, expires_at, changed_at) values
    ('orders', 'done-old', 'completed', 1, now() - interval '2 hours', now() - interval '8 days'),
    ('orders', 'done-new', 'completed', 1, now() + interval '2 days', now())`.execute(database.db);
});

afterAll(async () => {
  await database?.dispose();
});

describe('inboxkit prune --target http', () => {
  it('dry run counts expired keys; the run deletes them in batches and keeps live and leased ones', async () => {
    await seedKeys('idempotency_key', 'a-');
    const dry = await cli(['prune', ...dbArgs(), '--http', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/Dry run: 3 expired idempotency keys would be deleted .*\.idempotency_key\)/);
    expect(await keys('idempotency_key')).toHaveLength(5);

    const run = await cli(['prune', ...dbArgs(), '--target', 'http', '--batch-size', '2', '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      target: 'http',
      table: `${database.schema}.idempotency_key`,
      status: 'pruned',
      deleted: 3,
      batches: 2,
    });
    expect(await keys('idempotency_key')).toEqual(['a-busy-1', 'a-live-1']);
    // The inbox was not touched.
    expect((await database.rows('orders')).map((r) => r.id)).toEqual(['done-new', 'done-old']);
  });

  it('--target all prunes the inbox and the keys of --http-table; --target inbox stays the default', async () => {
    await seedKeys('api_keys', 'b-');
    const inboxOnly = await cli(['prune', ...dbArgs(), '--dry-run', '--json']);
    expect(JSON.parse(inboxOnly.stdout)).toMatchObject({ status: 'dry-run', deleted: 1, consumer: null });
    expect(JSON.parse(inboxOnly.stdout)).not.toHaveProperty('target');

    const both = await cli([
      'prune',
      ...dbArgs(),
      '--target',
      'all',
      '--http-table',
      `${database.schema}.api_keys`,
      '--json',
    ]);
    expect(both.code).toBe(0);
    expect(JSON.parse(both.stdout)).toMatchObject({
      inbox: { table: `${database.schema}.inbox`, status: 'pruned', deleted: 1 },
      http: { table: `${database.schema}.api_keys`, status: 'pruned', deleted: 3 },
    });
    expect((await database.rows('orders')).map((r) => r.id)).toEqual(['done-new']);
    expect(await keys('api_keys')).toEqual(['b-busy-1', 'b-live-1']);

    const text = await cli(['prune', ...dbArgs(), '--target', 'all', '--http-table', 'api_keys']);
    expect(text.stdout).toMatch(/Deleted 0 expired completed rows/);
    expect(text.stdout).toMatch(/Deleted 0 expired idempotency keys in 1 batch\(es\) .*\.api_keys\)/);
  });

  it('says how to create the key table when it does not exist (exit 3)', async () => {
    const { code, stderr } = await cli(['prune', ...dbArgs(), '--http', '--http-table', 'no_such_keys']);
    expect(code).toBe(3);
    expect(stderr).toMatch(
      /idempotency-key table .*\.no_such_keys does not exist: run migrateIdempotencyKeys/,
    );
  });

  it('rejects flags that do not fit the target (usage error)', () => {
    const parse = (argv: string[]) => parseCommandLine(argv, {}, Date.now());
    expect(() => parse(['prune', '--http', '--consumer', 'orders'])).toThrow(/--consumer selects inbox rows/);
    expect(() => parse(['prune', '--target', 'keys'])).toThrow(/use --target inbox, http or all/);
    expect(() => parse(['prune', '--http', '--target', 'inbox'])).toThrow(UsageError);
    expect(() => parse(['prune', '--http-table', 'x'])).toThrow(/--http-table needs --target http/);
    expect(() => parse(['prune', '--http', '--http-table', 'a.b.c'])).toThrow(/TABLE or SCHEMA\.TABLE/);
    expect(parse(['prune', '--http', '--schema', 'app'])).toMatchObject({
      target: 'http',
      httpTable: { schema: 'app', table: 'idempotency_key' },
    });
    expect(parse(['prune'])).toMatchObject({ target: 'inbox', consumer: undefined });
  });
});
