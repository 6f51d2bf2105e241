// What the claim statement's shape costs Postgres, per delivery: the backend CPU time (/proc/<pid>/stat of the
// one connection's backend, so Postgres must run on this machine) of `BEGIN; <claim>; COMMIT` sent as one
// simple-protocol query with literal parameters, as the store sends it on node-postgres. CPU time, not wall time:
// it holds on a busy machine where latencies do not. Variants, alternating in each round (median of 5 rounds):
//
//   function     the store's claim: `SELECT <inbox>_claim(…)` (inbox-sql.ts), what handle() sends
//   insert front a plain `INSERT … ON CONFLICT DO NOTHING RETURNING` in a CTE, the function called only when the
//                id already has a row (issue 23's idea for first deliveries)
//   read first   the function with a plain read of the row before its insert (a duplicate answered sooner)
//   plain insert the same row inserted with no decision at all (the floor of writing that row)
//   nothing      `BEGIN; SELECT 1; COMMIT` (what BEGIN and COMMIT cost by themselves)
//
// New ids first, then the same ids again (every claim a duplicate). synchronous_commit is off for the session:
// the WAL flush is not the statement's.
//
//   node --conditions=@inboxkit/source --import tsx bench/claim-shape.ts [--deliveries 3000]

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { inboxSchemaStatements, resolveInboxTableNames } from '@inboxkit/core/postgres';
import pg from 'pg';

import { setting } from './settings.js';

const { values } = parseArgs({ options: { deliveries: { type: 'string', default: '3000' } } });
const N = Number(values.deliveries);
const names = resolveInboxTableNames({ schema: `bench_shape_${randomBytes(4).toString('hex')}` });
const t = names.qualifiedTable;
const claim = names.qualified('_claim');
const FP = 'ab'.repeat(32);

const args = (id: string): string =>
  `'bench'::text, '${id}'::text, '${FP}'::text, NULL::timestamptz, '0'::int, NULL::text, '5'::int, '604800000'::float8, '5000'::text, NULL::uuid, NULL::float8`;
const row = (id: string): string =>
  `'bench'::text, '${id}'::text, 'completed', '${FP}'::text, 1, now(), now() + make_interval(secs => '604800000'::float8 / 1000)`;
const COLUMNS = 'consumer, message_id, status, fingerprint, attempts, changed_at, expires_at';
const VARIANTS: Record<string, (id: string) => string> = {
  function: (id) => `SELECT ${claim}(${args(id)}) AS answer`,
  'insert front': (id) =>
    `WITH l AS (SELECT set_config('lock_timeout', '5000', true)), fresh AS (INSERT INTO ${t} (${COLUMNS}) SELECT ${row(id)} FROM l
ON CONFLICT (consumer, message_id) DO NOTHING RETURNING attempts)
SELECT 'c' || attempts || ' new' AS answer FROM fresh UNION ALL SELECT ${claim}(${args(id)}) WHERE NOT EXISTS (SELECT FROM fresh)`,
  'read first': (id) => `SELECT ${names.qualified('_claim_read_first')}(${args(id)}) AS answer`,
  'plain insert': (id) => `INSERT INTO ${t} (${COLUMNS}) VALUES (${row(id)}) ON CONFLICT (consumer, message_id) DO NOTHING RETURNING attempts`,
  nothing: () => 'SELECT 1',
};

const client = new pg.Client({ connectionString: setting('DATABASE_URL') });
await client.connect();
for (const statement of inboxSchemaStatements(names)) await client.query(statement);
// The read-first variant: the migration's function with a plain read before its insert.
const definition = (await client.query<{ d: string }>('SELECT pg_get_functiondef($1::regproc) AS d', [claim])).rows[0]!.d;
const readFirst = definition
  .replace(/FUNCTION \S+\(/, `FUNCTION ${names.qualified('_claim_read_first')}(`)
  .replace(
    /\nBEGIN\n/,
    `\nBEGIN\n  SELECT * INTO h FROM ${t} WHERE consumer = p_consumer AND message_id = p_message_id;
  IF FOUND AND h.status = 'completed' AND (h.fingerprint IS NULL OR h.fingerprint = p_fingerprint) THEN
    RETURN 'd';
  END IF;\n`,
  );
await client.query(readFirst);
await client.query('SET synchronous_commit = off');
const pid = (await client.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p;
const ticks = (): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime, in clock ticks (10 ms)
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results: Record<string, { first: number[]; duplicate: number[] }> = {};
for (let round = 0; round < 5; round++) {
  for (const [name, statement] of Object.entries(VARIANTS)) {
    const ids = Array.from({ length: N }, (_, i) => `${name.replace(' ', '-')}-${round}-${i}`);
    const r = (results[name] ??= { first: [], duplicate: [] });
    for (const kind of ['first', 'duplicate'] as const) {
      const before = ticks();
      for (const id of ids) await client.query(`BEGIN; ${statement(id)}; COMMIT`);
      r[kind].push(((ticks() - before) * 10_000) / N);
    }
  }
}
console.log(`backend CPU per BEGIN; <claim>; COMMIT (µs, median of 5 rounds of ${N}; min–max)`);
for (const [name, r] of Object.entries(results)) {
  const show = (xs: number[]): string => `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`;
  console.log(`  ${name.padEnd(13)} first ${show(r.first).padEnd(16)} duplicate ${show(r.duplicate)}`);
}
await client.query(`DROP SCHEMA "${names.schema}" CASCADE`);
await client.end();
