// The Postgres commit ceiling on this machine: pgbench running a one-row INSERT (one transaction, one commit
// flush each) with as many clients as the core bench's concurrency. The inbox's throughput is reported as a
// fraction of it: it can never beat one commit per first delivery.
//
//   node --conditions=@inboxkit/source --import tsx bench/pgbench-ceiling.ts [--clients 16] [--seconds 15] [--runs 2]

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { promisify } from 'node:util';

import pg from 'pg';

import { postgresBin, printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '16' },
    seconds: { type: 'string', default: '15' },
    runs: { type: 'string', default: '2' },
  },
});
const clients = Number(values.clients);
const seconds = Number(values.seconds);
const runs = Number(values.runs);
const url = setting('DATABASE_URL');
const schema = `bench_pgb_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: url });
await admin.connect();
const dir = mkdtempSync(join(tmpdir(), 'inboxkit-pgbench-'));
const script = join(dir, 'insert.sql');
// The same one-row effect the core bench's handlers write.
writeFileSync(
  script,
  `\\set n random(1, 1000000000)\nINSERT INTO "${schema}".effects (message_id, amount) VALUES ('pgb-' || :n, 42);\n`,
);
const tps: number[] = [];
try {
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.query(
    `CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`,
  );
  const command = [
    `${postgresBin()}/pgbench`,
    '-n',
    '-M',
    'prepared',
    '-c',
    String(clients),
    '-j',
    '2',
    '-T',
    String(seconds),
    '-f',
    script,
    url,
  ];
  console.log(`pgbench: ${command.join(' ').replace(script, 'insert.sql')}`);
  console.log(
    `script: INSERT INTO effects (message_id, amount) VALUES ('pgb-' || random, 42)   -- autocommit: one commit each`,
  );
  for (let r = 0; r < runs; r++) {
    const { stdout } = await promisify(execFile)(command[0]!, command.slice(1), {
      timeout: (seconds + 60) * 1_000,
    });
    const m =
      /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout) ?? /tps = ([\d.]+)/.exec(stdout);
    if (m === null) throw new Error(`could not read tps from pgbench:\n${stdout}`);
    tps.push(Number(m[1]));
    const latency = /latency average = ([\d.]+) ms/.exec(stdout)?.[1];
    console.log(`run ${r + 1}: ${Number(m[1]).toFixed(0)} tps, latency average ${latency ?? '?'} ms`);
  }
} finally {
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
}
printResult({ clients, seconds, runs: tps, best: Math.max(...tps) });
