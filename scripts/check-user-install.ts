// A user's install, as the README tells one: `npm install @inboxkit/core kysely@<line> pg` in an empty project on
// the Node that runs this script, then a consumer that handles one message twice against a real Postgres. It
// proves a kysely line inboxkit declares as a peer works on that Node (kysely 0.29 needs Node ≥ 22; CI runs it
// on Node 24 and 22, and kysely 0.28 on Node 20).
//
//   node --import tsx scripts/check-user-install.ts --kysely 0.29 [--keep]
//
// Needs DATABASE_URL (the tests' services: `npm run services:up`, then `. .services/env`). @inboxkit/core comes
// from this checkout (`npm pack`, whose prepack builds it); kysely and pg from the registry (npm's cache first).
import { execFile, type ExecFileOptions } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { kysely: { type: 'string' }, keep: { type: 'boolean' } } });
const kyselyLine = values.kysely;
if (!kyselyLine || !/^\d+\.\d+$/.test(kyselyLine)) {
  console.error('check-user-install: give the kysely line to install, e.g. --kysely 0.29');
  process.exit(2);
}
const databaseUrl = process.env.DATABASE_URL ?? readServicesEnv().DATABASE_URL;
if (!databaseUrl) {
  console.error('check-user-install: no DATABASE_URL (run `npm run services:up` first)');
  process.exit(2);
}

function readServicesEnv(): Record<string, string> {
  try {
    const text = readFileSync(join(ROOT, '.services', 'env'), 'utf8');
    return Object.fromEntries(
      text
        .split('\n')
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
  } catch {
    return {};
  }
}

// npm's bin starts with `#!/usr/bin/env node`: with this Node's folder first on PATH, npm (and its engine check)
// runs on the Node under test, not on whichever node the shell finds first.
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`;

function run(file: string, args: string[], options: ExecFileOptions = {}): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const env = { ...process.env, ...options.env, PATH };
    execFile(file, args, { maxBuffer: 64 * 1024 * 1024, ...options, env }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed:\n${String(stdout)}${String(stderr)}`));
      else resolvePromise(`${String(stdout)}${String(stderr)}`);
    });
  });
}

// What a user writes after the README: migrate, one consumer with a Kysely effect, one message delivered twice.
// Any warning Node prints (a deprecation on this Node) fails the check.
const USER_PROGRAM = `
import { idempotentConsumer } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

const warnings = [];
process.on('warning', (warning) => warnings.push(warning.name + ': ' + warning.message));

const schema = 'user_install_' + process.pid;
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
try {
  await sql\`create schema \${sql.id(schema)}\`.execute(db);
  await sql\`create table \${sql.id(schema, 'charges')} (order_id text primary key, amount int not null)\`.execute(db);
  await migrateInbox(db, { schema });
  const consumer = idempotentConsumer({
    name: 'billing',
    store: new PostgresInboxStore({ db, schema }),
    handler: async (message, { tx }) => {
      await tx.withSchema(schema).insertInto('charges').values(message.payload).execute();
    },
  });
  const delivery = {
    id: 'order-1',
    body: JSON.stringify({ order_id: 'o-1', amount: 42 }),
    headers: {},
    timestamp: new Date(),
    source: { transport: 'memory', destination: 'orders' },
  };
  const first = await consumer.handle(delivery);
  const second = await consumer.handle(delivery);
  const rows = await db.withSchema(schema).selectFrom('charges').selectAll().execute();
  if (first.status !== 'processed') throw new Error('first delivery: ' + JSON.stringify(first));
  if (second.status !== 'duplicate') throw new Error('second delivery: ' + JSON.stringify(second));
  if (rows.length !== 1) throw new Error('charges: ' + rows.length);
  if (warnings.length > 0) throw new Error('Node printed warnings: ' + warnings.join('; '));
  console.log('user install: ok (processed, then duplicate; one charge)');
} finally {
  await sql\`drop schema if exists \${sql.id(schema)} cascade\`.execute(db);
  await db.destroy();
}
`;

const work = mkdtempSync(join(tmpdir(), `inboxkit-user-kysely-${kyselyLine}-`));
const started = Date.now();
const say = (line: string) =>
  console.log(`[check-user-install ${((Date.now() - started) / 1000).toFixed(0)}s] ${line}`);
try {
  say(`node ${process.version}, kysely ${kyselyLine}, in ${work}`);
  // The prepack's build (turbo) prints to the same stdout as npm pack: the tarball is found in the folder.
  await run('npm', ['pack', '-w', 'packages/core', '--pack-destination', work, '--silent'], {
    cwd: ROOT,
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' },
  });
  const tarballs = readdirSync(work).filter((name) => name.endsWith('.tgz'));
  if (tarballs.length !== 1) throw new Error(`npm pack left ${tarballs.length} tarballs in ${work}`);
  const tarball = join(work, tarballs[0] ?? '');
  writeFileSync(
    join(work, 'package.json'),
    JSON.stringify({ name: 'a-user', private: true, type: 'module' }),
  );
  // The npm that runs here is the one on PATH; its engine check uses the Node that runs it, so an install of
  // kysely 0.29 under Node 20 would warn (EBADENGINE): the warning is printed, and fails this check.
  const installLog = await run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=warn',
      tarball,
      `kysely@~${kyselyLine}.0`,
      'pg',
    ],
    { cwd: work },
  );
  const warnings = installLog.split('\n').filter((line) => /npm (warn|WARN)/.test(line));
  if (warnings.length > 0) throw new Error(`npm install printed warnings:\n${warnings.join('\n')}`);
  const installed = JSON.parse(
    readFileSync(join(work, 'node_modules', 'kysely', 'package.json'), 'utf8'),
  ) as {
    version: string;
  };
  if (!installed.version.startsWith(`${kyselyLine}.`))
    throw new Error(`installed kysely ${installed.version}`);
  say(`installed @inboxkit/core with kysely ${installed.version}`);

  writeFileSync(join(work, 'main.mjs'), USER_PROGRAM);
  const output = await run(process.execPath, ['main.mjs'], {
    cwd: work,
    env: { ...process.env, DATABASE_URL: databaseUrl, NODE_OPTIONS: '' },
  });
  process.stdout.write(output);
  if (!output.includes('user install: ok')) throw new Error('the program did not finish');
  say('ok');
} catch (error) {
  console.error(`check-user-install: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
} finally {
  if (values.keep) say(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
