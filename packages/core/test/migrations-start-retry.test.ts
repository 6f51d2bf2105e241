// Issue 22, item 9: a process started while Postgres is down or restarting must not die in its migrations when
// its consumers would have waited: migrateInbox (and migrateReconciliation, and through runSchemaMigrations the
// outbox and HTTP-key migrations) keep trying with the consumers' bounded start-up policy while the database
// cannot be reached, and reject at once on what no retry fixes. A proxy on a port of its own stands in for a
// database that is down, then comes up.

import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import type { TcpProxy } from '../../../test/support/tcp-proxy.js';
import type { Logger } from '../src/consumer-types.js';
import { isTransientDatabaseError } from '../src/database-start-retry.js';
import { migrateReconciliation } from '../src/patterns/index.js';
import { inboxMigrations, migrateInbox, runSchemaMigrations } from '../src/postgres/index.js';
import { StartTimeoutError } from '../src/start-retry.js';
import { databaseUrl } from './support/postgres.js';

/** A logger whose `firstWarning` resolves on the first warning (a retry being announced). */
function warningLogger(): { logger: Logger; warnings: string[]; firstWarning: Promise<void> } {
  const warnings: string[] = [];
  let warned!: () => void;
  const firstWarning = new Promise<void>((resolve) => (warned = resolve));
  const noop = (): void => undefined;
  return {
    warnings,
    firstWarning,
    logger: {
      debug: noop,
      info: noop,
      error: noop,
      warn: (_obj: unknown, msg?: string) => {
        warnings.push(msg ?? '');
        warned();
      },
    },
  };
}

function kyselyAt(url: URL): { db: Kysely<unknown>; pool: pg.Pool } {
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2, connectionTimeoutMillis: 2_000 });
  pool.on('error', () => undefined);
  return { db: new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) }), pool };
}

const fast = { initialDelayMs: 50, maxDelayMs: 200 };
const schemas: string[] = [];
let admin: pg.Pool;
let proxy: TcpProxy;
let viaProxy: URL;

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
  const url = new URL(databaseUrl());
  proxy = await tcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  viaProxy = new URL(url);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
});

afterAll(async () => {
  await proxy?.close();
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin?.end();
});

function freshSchema(label: string): string {
  const schema = `mig_retry_${label}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  schemas.push(schema);
  return schema;
}

async function tables(schema: string): Promise<string[]> {
  const { rows } = await admin.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1',
    [schema],
  );
  return rows.map((r) => r.table_name);
}

describe('migrations at start-up while the database is down', () => {
  it.each([
    ['migrateInbox', 'inbox'],
    ['migrateReconciliation', 'reconciliation'],
  ] as const)('%s keeps trying until the database is reachable, then migrates', async (name, label) => {
    await proxy.close();
    const { db } = kyselyAt(viaProxy);
    const schema = freshSchema(label);
    const { logger, warnings, firstWarning } = warningLogger();
    try {
      const retry = { logger, startRetry: fast };
      const migrating = (
        name === 'migrateInbox'
          ? migrateInbox(db, { schema, ...retry })
          : migrateReconciliation(db, { schema, ...retry })
      ).then(
        () => 'migrated',
        (error: unknown) => error,
      );
      await Promise.race([firstWarning, migrating]);
      expect(warnings[0], 'a retry is announced while the database is down').toMatch(/retrying/);
      await proxy.open();
      expect(await migrating).toBe('migrated');
      expect((await tables(schema)).length).toBeGreaterThan(0);
    } finally {
      await db.destroy();
    }
  });

  it('runSchemaMigrations (under the outbox and HTTP-key migrations) keeps trying too', async () => {
    await proxy.close();
    const { db } = kyselyAt(viaProxy);
    const schema = freshSchema('shared');
    const { logger, firstWarning } = warningLogger();
    try {
      const migrating = runSchemaMigrations(
        db,
        { schema, migrationTable: 'shared_migrations', provider: inboxMigrations({ schema }) },
        { logger, startRetry: fast, what: 'migrateOutbox' },
      ).then(
        () => 'migrated',
        (error: unknown) => error,
      );
      await Promise.race([firstWarning, migrating]);
      await proxy.open();
      expect(await migrating).toBe('migrated');
      expect(await tables(schema)).toContain('shared_migrations');
    } finally {
      await db.destroy();
    }
  });

  it('tries once with startTimeoutMs 0 (the CLI) and rejects with the error itself', async () => {
    await proxy.close();
    const { db } = kyselyAt(viaProxy);
    const { logger, warnings } = warningLogger();
    try {
      const error = await migrateInbox(db, { schema: freshSchema('once'), startTimeoutMs: 0, logger }).catch(
        (e: unknown) => e,
      );
      expect(error).not.toBeInstanceOf(StartTimeoutError);
      expect(isTransientDatabaseError(error)).toBe(true);
      expect(warnings).toEqual([]);
    } finally {
      await db.destroy();
    }
  });

  it('rejects with a StartTimeoutError naming the last error once startTimeoutMs has passed', async () => {
    await proxy.close();
    const { db } = kyselyAt(viaProxy);
    try {
      const error = await migrateInbox(db, {
        schema: freshSchema('timeout'),
        startTimeoutMs: 500,
        startRetry: fast,
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StartTimeoutError);
      expect((error as StartTimeoutError).attempts).toBeGreaterThanOrEqual(1);
      expect((error as Error).message).toMatch(/ECONNREFUSED|connect/);
    } finally {
      await db.destroy();
    }
  });

  it('stops trying when its signal aborts, with the signal reason', async () => {
    await proxy.close();
    const { db } = kyselyAt(viaProxy);
    const { logger, firstWarning } = warningLogger();
    const controller = new AbortController();
    try {
      const migrating = migrateInbox(db, {
        schema: freshSchema('abort'),
        logger,
        startRetry: fast,
        signal: controller.signal,
      }).catch((e: unknown) => e);
      await Promise.race([firstWarning, migrating]);
      controller.abort(new Error('shutting down'));
      expect(await migrating).toMatchObject({ message: 'shutting down' });
    } finally {
      await db.destroy();
    }
  });

  it('rejects at once, without a retry, when the database does not exist', async () => {
    const url = new URL(databaseUrl());
    url.pathname = `/no_such_db_${Math.random().toString(36).slice(2, 8)}`;
    const { db } = kyselyAt(url);
    const { logger, warnings } = warningLogger();
    try {
      const error = await migrateInbox(db, { schema: freshSchema('nodb'), logger, startRetry: fast }).catch(
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: '3D000' });
      expect(warnings).toEqual([]);
    } finally {
      await db.destroy();
    }
  });

  it('rejects at once a migration that fails in SQL (here: the schema name is taken by a table name clash)', async () => {
    const schema = freshSchema('sqlerr');
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".inbox (x int)`);
    const url = new URL(databaseUrl());
    const { db } = kyselyAt(url);
    const { logger, warnings } = warningLogger();
    try {
      const error = await migrateInbox(db, { schema, logger, startRetry: fast }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(StartTimeoutError);
      expect(warnings).toEqual([]);
      await sql`SELECT 1`.execute(db);
    } finally {
      await db.destroy();
    }
  });
});

describe('isTransientDatabaseError', () => {
  const withCode = (code: string, message = 'x'): Error => Object.assign(new Error(message), { code });
  it.each([
    ['connection refused', withCode('ECONNREFUSED')],
    ['refused on both addresses (AggregateError)', new AggregateError([withCode('ECONNREFUSED')], 'connect')],
    ['the database system is starting up (57P03)', withCode('57P03')],
    ['terminating connection due to administrator command (57P01)', withCode('57P01')],
    ['crash shutdown (57P02)', withCode('57P02')],
    ['a connection failure (08006)', withCode('08006')],
    ['too many clients (53300)', withCode('53300')],
    ["node-postgres' connection terminated unexpectedly", new Error('Connection terminated unexpectedly')],
    ["pg-pool's connect timeout", new Error('timeout exceeded when trying to connect')],
    ['a wrapped cause', new Error('migration failed', { cause: withCode('57P03') })],
  ])('retries %s', (_, error) => {
    expect(isTransientDatabaseError(error)).toBe(true);
  });
  it.each([
    ['a bad password (28P01)', withCode('28P01')],
    ['no such role (28000)', withCode('28000')],
    ['no such database (3D000)', withCode('3D000')],
    ['permission denied (42501)', withCode('42501')],
    ['a syntax error (42601)', withCode('42601')],
    ['a programming error', new TypeError('x is not a function')],
    ['a TLS failure', withCode('DEPTH_ZERO_SELF_SIGNED_CERT')],
  ])('does not retry %s', (_, error) => {
    expect(isTransientDatabaseError(error)).toBe(false);
  });
});
