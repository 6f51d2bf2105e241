// What the claim costs Postgres, by the way it is sent: one-row-effect transactions on node-postgres at
// concurrency 16, new ids, with the Postgres backends' CPU per transaction (/proc/<pid>/stat) beside Node's
// and the rate. Variants alternate within each round (order reversed every other round); medians of the rounds.
//
//   bare            BEGIN / INSERT effect / COMMIT                                     (3 round trips)
//   row             BEGIN; the inbox's hot row as a plain INSERT … ON CONFLICT DO NOTHING (literals) / effect / COMMIT
//   claim           BEGIN; the store's claim call (literals) / effect / COMMIT: what pgSeam sends (3)
//   claim, no GUC   the same claim function without its set_config('lock_timeout') (a copy in the bench schema)
//   claim bound     BEGIN / the claim with bind parameters, unnamed / effect / COMMIT: Knex, TypeORM (4)
//   claim prepared  BEGIN / the claim as a named prepared statement / effect / COMMIT (4)
//
//   node --conditions=@inboxkit/source --import tsx packages/data/bench/claim-cost.ts [--n 2000] [--rounds 5]
//     [--only 'bare,claim']

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { idempotentConsumer } from '@inboxkit/core';
import {
  literalStatement,
  migrateInbox,
  PostgresInboxStore,
  type SqlSeam,
  type SqlStatement,
} from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { setting } from '../../../bench/settings.js';
import { pgSeam } from '@inboxkit/data/pg';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '5' },
    only: { type: 'string' },
  },
});
const N = Number(values.n);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;

const url = setting('DATABASE_URL');
const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY });
const backends = new Set<number>();
pool.on('connect', (client) => {
  const pid = (client as unknown as { processID?: number }).processID;
  if (typeof pid === 'number') backends.add(pid);
});
const admin = new pg.Pool({ connectionString: url, max: 1 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: admin }) });
const schema = `claim_cost_${Date.now()}`;
await sql.raw(`CREATE SCHEMA "${schema}"`).execute(db);
await migrateInbox(db, { schema });
await admin.query(
  `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`,
);

// The store's claim exactly as it sends it: recorded from one delivery through pgSeam.
let recorded: SqlStatement | undefined;
const seam = pgSeam(pool);
const recording: SqlSeam<pg.PoolClient> = {
  query: (statement) => seam.query(statement),
  transaction: (work, options) => {
    recorded ??= options?.first;
    return seam.transaction(work, options);
  },
};
const consumer = idempotentConsumer<unknown, pg.PoolClient>({
  name: 'claim-cost',
  store: new PostgresInboxStore<unknown, pg.PoolClient>({ seam: recording, schema }),
  handler: async () => {},
});
await consumer.handle({ id: randomUUID(), body: '{}', headers: {}, source: { transport: 'bench' } });
if (recorded === undefined) throw new Error('no claim recorded');
const claimStatement: SqlStatement = recorded;
/** The claim of a new id (the message id is its second parameter). */
const claimOf = (id: string): SqlStatement => ({
  sql: claimStatement.sql,
  parameters: claimStatement.parameters.map((p, i) => (i === 1 ? id : p)),
});

// A copy of the claim function without the set_config of its lock timeout.
const claimFunction = /"([^"]+)"\."([^"]+)"\(/.exec(claimStatement.sql);
if (claimFunction === null) throw new Error(`unexpected claim: ${claimStatement.sql}`);
const { rows: defs } = await admin.query<{ def: string }>(
  `SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = $1 AND p.proname = $2`,
  [claimFunction[1], claimFunction[2]],
);
const def = defs[0]!.def;
const noGuc = def
  .replace(/^(CREATE (?:OR REPLACE )?FUNCTION [^(]*?)"?([a-z_]+)"?\(/, `$1$2_no_guc(`)
  .replace(/v_setting text := set_config\([^;]*\);/, '');
if (!/_no_guc\(/.test(noGuc) || noGuc.includes('set_config')) {
  throw new Error(`could not derive the function without set_config from ${def.slice(0, 200)}`);
}
await admin.query(noGuc);
const noGucOf = (id: string): SqlStatement => ({
  sql: claimStatement.sql.replace(`"${claimFunction[2]}"(`, `"${claimFunction[2]}_no_guc"(`),
  parameters: claimOf(id).parameters,
});

const insertEffect = `INSERT INTO "${schema}".effects (consumer, message_id) VALUES ($1, $2)`;
const lit = (value: string): string => `'${value.replaceAll("'", "''")}'`;

type Variant = (client: pg.PoolClient, id: string) => Promise<void>;
const effect = (client: pg.PoolClient, id: string) => client.query(insertEffect, ['claim-cost', id]);
const VARIANTS: Record<string, Variant> = {
  bare: async (client, id) => {
    await client.query('BEGIN');
    await effect(client, id);
    await client.query('COMMIT');
  },
  row: async (client, id) => {
    await client.query(
      `BEGIN; INSERT INTO "${schema}".inbox (consumer, message_id, status, fingerprint, attempts, changed_at, expires_at)
       VALUES ('row', ${lit(id)}, 'completed', ${lit(id)}, 1, now(), now() + make_interval(secs => 604800))
       ON CONFLICT (consumer, message_id) DO NOTHING RETURNING attempts`,
    );
    await effect(client, id);
    await client.query('COMMIT');
  },
  claim: async (client, id) => {
    await client.query(`BEGIN;\n${literalStatement(claimOf(id))}`);
    await effect(client, id);
    await client.query('COMMIT');
  },
  'claim, no GUC': async (client, id) => {
    await client.query(`BEGIN;\n${literalStatement(noGucOf(id))}`);
    await effect(client, id);
    await client.query('COMMIT');
  },
  'claim bound': async (client, id) => {
    await client.query('BEGIN');
    const claim = claimOf(id);
    await client.query(claim.sql, claim.parameters as unknown[]);
    await effect(client, id);
    await client.query('COMMIT');
  },
  'claim prepared': async (client, id) => {
    await client.query('BEGIN');
    const claim = claimOf(id);
    await client.query({ name: 'claim', text: claim.sql, values: claim.parameters as unknown[] });
    await effect(client, id);
    await client.query('COMMIT');
  },
};
const names = values.only?.split(',') ?? Object.keys(VARIANTS);

function backendsUs(): number {
  let ticks = 0;
  for (const pid of backends) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * 10_000;
}

interface Sample {
  readonly rate: number;
  readonly nodeUs: number;
  readonly pgUs: number;
}

async function run(variant: Variant, count: number): Promise<Sample> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const pg0 = backendsUs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) {
        const client = await pool.connect();
        try {
          await variant(client, randomUUID());
        } finally {
          client.release();
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return {
    rate: count / seconds,
    nodeUs: (cpu.user + cpu.system) / count,
    pgUs: (backendsUs() - pg0) / count,
  };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
try {
  for (const name of names) await run(VARIANTS[name]!, 300); // warm-up: connections, plans
  const samples = new Map<string, Sample[]>(names.map((n) => [n, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) samples.get(name)!.push(await run(VARIANTS[name]!, N));
  }
  const bare = samples.get('bare');
  console.log(
    `Claim cost: ${ROUNDS} alternating rounds × ${N} transactions, concurrency ${CONCURRENCY}, node-postgres, new ids (medians)\n`,
  );
  console.log('| variant | tx/s | × bare | Postgres backends µs/tx | Node µs/tx |');
  console.log('|---|---:|---:|---:|---:|');
  for (const name of names) {
    const s = samples.get(name)!;
    const ratio = bare === undefined ? '' : `${median(s.map((x, i) => x.rate / bare[i]!.rate)).toFixed(2)}×`;
    console.log(
      `| ${name} | ${median(s.map((x) => x.rate)).toFixed(0)} | ${ratio} | ${median(s.map((x) => x.pgUs)).toFixed(0)} | ${median(s.map((x) => x.nodeUs)).toFixed(0)} |`,
    );
  }
} finally {
  await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  await pool.end();
  await db.destroy();
}
