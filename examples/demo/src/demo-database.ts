// The demo's Postgres: PGlite (Postgres compiled to WebAssembly, inside this process) when no server is
// wanted, or a real server from DATABASE_URL in a schema of its own. Either way the inbox is the real
// PostgresInboxStore on tables made by the real migrations.

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { PGlite } from '@electric-sql/pglite';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';

import { createPaymentsTable } from './payments.js';
import type { DemoDatabase } from './payments.js';

/** An open demo database with the inbox and payments tables. */
export interface DemoDb {
  readonly db: Kysely<DemoDatabase>;
  readonly store: PostgresInboxStore<DemoDatabase>;
  /** The header's lines about the database (each under 80 characters). */
  readonly label: readonly string[];
  /** The schema of the inbox tables (and, on a server, of the payments table). */
  readonly schema: string;
  /** Milliseconds it took to start the database and migrate it. */
  readonly startMs: number;
  /** Payment rows per payment id. */
  paymentRows(): Promise<Map<string, number>>;
  /** Closes the connection (and, on a server, drops the demo's schema). */
  close(): Promise<void>;
}

/** PGlite's package directory and version, found from its entry point (its package.json is not exported). */
function pglitePackage(): { readonly dir: string; readonly version: string } | undefined {
  try {
    let dir = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
    while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
    const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string };
    return { dir, version };
  } catch {
    return undefined;
  }
}

/**
 * Where an initialised, empty PGlite data directory is kept between runs: creating one (initdb) is most of
 * PGlite's start-up time. Only the empty cluster is cached, per PGlite version; the migrations run on every
 * start. The cache sits in node_modules/.cache (or the temp dir), so a fresh install starts afresh.
 */
function pgliteCacheFile(): string {
  const pkg = pglitePackage();
  // <root>/node_modules/@electric-sql/pglite → <root>/node_modules/.cache
  const nodeModules = pkg === undefined ? undefined : dirname(dirname(pkg.dir));
  const base =
    nodeModules !== undefined && existsSync(nodeModules)
      ? join(nodeModules, '.cache', 'inboxkit-demo')
      : join(tmpdir(), 'inboxkit-demo');
  return join(base, `pglite-${pkg?.version ?? 'unknown'}-datadir.tar`);
}

async function startPglite(): Promise<{ pglite: PGlite; cached: boolean }> {
  const cache = pgliteCacheFile();
  if (existsSync(cache)) {
    try {
      const pglite = new PGlite({ loadDataDir: new Blob([await readFile(cache)]) });
      await pglite.waitReady;
      return { pglite, cached: true };
    } catch {
      // A damaged cache: fall through and initialise afresh.
    }
  }
  const pglite = new PGlite();
  await pglite.waitReady;
  try {
    const dump = await pglite.dumpDataDir('none');
    await mkdir(dirname(cache), { recursive: true });
    const partial = `${cache}.${process.pid}.tmp`;
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()));
    await rename(partial, cache);
  } catch {
    // Caching is an optimisation only.
  }
  return { pglite, cached: false };
}

async function paymentRows(db: Kysely<DemoDatabase>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('payments')
    .select(['payment_id', (eb) => eb.fn.countAll<string>().as('n')])
    .groupBy('payment_id')
    .execute();
  return new Map(rows.map((r) => [r.payment_id, Number(r.n)]));
}

/** Starts PGlite in this process, runs the inbox migrations and creates the payments table. */
export async function openEmbeddedDatabase(): Promise<DemoDb> {
  const started = performance.now();
  const { pglite, cached } = await startPglite();
  const db = new Kysely<DemoDatabase>({ dialect: new PGliteDialect(pglite) });
  await migrateInbox(db);
  await createPaymentsTable(db);
  const { rows } = await pglite.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  const server = rows[0]?.v.split(' ')[0] ?? '?';
  return {
    db,
    store: new PostgresInboxStore<DemoDatabase>({ db }),
    label: [
      `PGlite ${pglitePackage()?.version ?? ''}: Postgres ${server} in this process${cached ? '' : ' (first run: initdb)'}`,
    ],
    schema: 'inboxkit',
    startMs: performance.now() - started,
    paymentRows: () => paymentRows(db),
    close: () => db.destroy(),
  };
}

/**
 * Connects to the server at `url`, creates a schema of its own for this run (inbox and payments tables),
 * and drops it again on `close()`. Rejects with a message naming the server when it cannot connect.
 */
export async function openServerDatabase(url: string): Promise<DemoDb> {
  const started = performance.now();
  const schema = `inboxkit_demo_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await admin.connect();
  let server: string;
  try {
    await admin.query(`CREATE SCHEMA "${schema}"`);
    server = String(
      (await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?',
    ).split(' ')[0]!;
  } finally {
    await admin.end();
  }
  // Every connection of the pool works in the demo's schema.
  const pool = new pg.Pool({ connectionString: url, options: `-c search_path=${schema}`, max: 10 });
  pool.on('error', () => undefined);
  const db = new Kysely<DemoDatabase>({ dialect: new PostgresDialect({ pool }) });
  await migrateInbox(db, { schema });
  await createPaymentsTable(db);
  return {
    db,
    store: new PostgresInboxStore<DemoDatabase>({ db, schema }),
    label: [`Postgres ${server} at ${new URL(url).host}`, `schema ${schema}, dropped at the end`],
    schema,
    startMs: performance.now() - started,
    paymentRows: () => paymentRows(db),
    close: async () => {
      await sql
        .raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
        .execute(db)
        .catch(() => undefined);
      await db.destroy();
    },
  };
}
