// Where the consumer's own CPU goes, per delivery: Node CPU time (user + system, process.cpuUsage) divided by
// deliveries, for the same one-row effect at concurrency 16 on the same pool. Throughput on a busy 2-core
// machine is noisy, and Node competes with Postgres for the same cores; CPU microseconds per delivery are
// far steadier and say how much of a gap is the JS path itself. Beside it, the CPU time of the pool's own
// Postgres backends per delivery (/proc/<pid>/stat of each connection's backend, when Postgres runs on this
// machine): Postgres' share of the work, whoever else is busy — the WAL writer and checkpointer are not in it.
// And the rest of the machine's busy CPU time per delivery (from /proc/stat, minus Node's): on a quiet machine
// that is Postgres' whole share; on a busy one it includes everyone else's work and says little.
//   bare pg        BEGIN; INSERT effect; COMMIT on node-postgres (no dedupe)
//   bare kysely    the same transaction through Kysely's db.transaction() (what a handler's tx costs)
//   raw claim      BEGIN + a two-column claim row in one round trip, the effect, COMMIT (the design's bare SQL)
//   inbox first    idempotentConsumer().handle(), new ids (claim + effect + commit)
//   inbox dup      handle() of ids already completed (the claim's one round trip)
//   inbox once     handle() with a statement handler (statementHandler): the claim and the effect in one
//                  autocommit round trip (a function in pg_temp)
//   once dup       the same of ids already completed
//
//   node --conditions=@inboxkit/source --import tsx bench/core-cpu.ts [--deliveries 5000] [--rounds 2]
//   (CPU_CONCURRENCY=1 in the environment drives one delivery at a time instead of 16: round trips set the pace)

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { idempotentConsumer, statementHandler } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

import { printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: { deliveries: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '2' } },
});
const N = Number(values.deliveries);
const rounds = Number(values.rounds);
const CONCURRENCY = Number(process.env.CPU_CONCURRENCY ?? 16);
const schema = `bench_cpu_${randomBytes(4).toString('hex')}`;
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), max: CONCURRENCY });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const effects = `"${schema}".effects`;
/** Backend pids of the pool's connections (pg reports each in BackendKeyData). */
const backends = new Set<number>();
pool.on('connect', (client) => {
  const pid = (client as unknown as { processID?: number }).processID;
  if (typeof pid === 'number') backends.add(pid);
});
const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
  name: 'cpu',
  store: new PostgresInboxStore<unknown>({ db, schema }),
  handler: async (message, { tx }) => {
    await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${message.id}, 42)`.execute(
      tx,
    );
  },
});

const once = idempotentConsumer<{ id: string; amount: number }, Transaction<unknown>>({
  name: 'cpu-once',
  store: new PostgresInboxStore<unknown>({ db, schema }),
  handler: statementHandler((m) =>
    (db as unknown as Kysely<{ effects: { message_id: string; amount: number } }>)
      .withSchema(schema)
      .insertInto('effects')
      .values({ message_id: m.id, amount: m.payload.amount }),
  ),
});

function message(id: string): InboundMessage {
  return { id, body: JSON.stringify({ id, amount: 42 }), headers: {}, source: { transport: 'bench' } };
}

/** Busy CPU time of the whole machine so far, in µs (all CPUs; /proc/stat counts in USER_HZ = 100/s). */
function machineBusyUs(): number {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
    const n = fields.map(Number);
    const idle = (n[3] ?? 0) + (n[4] ?? 0);
    const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - idle) * 10_000;
  } catch {
    return Number.NaN;
  }
}

/** CPU time (µs) of the pool's Postgres backends so far; NaN when they cannot be read (remote Postgres). */
function backendsCpuUs(): number {
  let ticks = 0;
  for (const pid of backends) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of the line)
    } catch {
      return Number.NaN;
    }
  }
  return ticks * 10_000; // USER_HZ = 100
}

interface Cost {
  readonly cpuUs: number;
  readonly pgUs: number;
  readonly otherUs: number;
  readonly perSecond: number;
}

async function drive(ids: readonly string[], work: (id: string) => Promise<void>): Promise<Cost> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const busy0 = machineBusyUs();
  const pg0 = backendsCpuUs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await work(ids[next++]!);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const node = cpu.user + cpu.system;
  return {
    cpuUs: node / ids.length,
    pgUs: (backendsCpuUs() - pg0) / ids.length,
    otherUs: (machineBusyUs() - busy0 - node) / ids.length,
    perSecond: ids.length / seconds,
  };
}

const VARIANTS = {
  'bare pg': (id: string) =>
    (async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(`INSERT INTO ${effects} (message_id, amount) VALUES ($1, $2)`, [id, 42]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    })(),
  'bare kysely': (id: string) =>
    db.transaction().execute(async (tx) => {
      await sql`INSERT INTO ${sql.table(`${schema}.effects`)} (message_id, amount) VALUES (${id}, 42)`.execute(
        tx,
      );
    }),
  // The design's SQL with nothing else: a narrow claim row sent with BEGIN in one round trip, the effect, COMMIT.
  'raw claim': (id: string) =>
    (async () => {
      const client = await pool.connect();
      try {
        await client.query(
          `BEGIN; INSERT INTO "${schema}".raw_claims (consumer, message_id) VALUES ('cpu', '${id}') ON CONFLICT DO NOTHING`,
        );
        await client.query(`INSERT INTO ${effects} (message_id, amount) VALUES ($1, $2)`, [id, 42]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    })(),
  'inbox first': async (id: string) => {
    const o = await consumer.handle(message(id));
    if (o.status !== 'processed') throw new Error(`expected processed, got ${o.status}`);
  },
  'inbox once': async (id: string) => {
    const o = await once.handle(message(id));
    if (o.status !== 'processed') throw new Error(`expected processed, got ${o.status}`);
  },
} as const;

type Name = keyof typeof VARIANTS | 'inbox dup' | 'once dup';
const best = new Map<Name, Cost>();
const keep = (name: Name, r: Cost): void => {
  const prev = best.get(name);
  // Lowest CPU per delivery and highest throughput, each over the rounds.
  best.set(
    name,
    prev
      ? {
          cpuUs: Math.min(prev.cpuUs, r.cpuUs),
          pgUs: Math.min(prev.pgUs, r.pgUs),
          otherUs: Math.min(prev.otherUs, r.otherUs),
          perSecond: Math.max(prev.perSecond, r.perSecond),
        }
      : r,
  );
};
try {
  await migrateInbox(db, { schema });
  await pool.query(
    `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`,
  );
  await pool.query(
    `CREATE TABLE "${schema}".raw_claims (consumer text NOT NULL, message_id text NOT NULL, PRIMARY KEY (consumer, message_id))`,
  );
  for (const [name, work] of Object.entries(VARIANTS))
    await drive(
      Array.from({ length: 300 }, (_, i) => `warm-${name}-${i}`),
      work,
    );
  for (let r = 0; r < rounds; r++) {
    for (const [name, work] of Object.entries(VARIANTS) as [
      keyof typeof VARIANTS,
      (id: string) => Promise<void>,
    ][]) {
      const ids = Array.from({ length: N }, (_, i) => `r${r}-${name}-${i}`);
      keep(name, await drive(ids, work));
      if (name === 'inbox first' || name === 'inbox once') {
        const c = name === 'inbox first' ? consumer : once;
        keep(
          name === 'inbox first' ? 'inbox dup' : 'once dup',
          await drive(ids, async (id) => {
            const o = await c.handle(message(id));
            if (o.status !== 'duplicate') throw new Error(`expected duplicate, got ${o.status}`);
          }),
        );
      }
    }
  }
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await db.destroy();
}
const bare = best.get('bare pg')!;
for (const [name, r] of best) {
  console.log(
    `${name.padEnd(12)} ${r.cpuUs.toFixed(0).padStart(6)} µs Node CPU per delivery (${(r.cpuUs / bare.cpuUs).toFixed(2)}× bare pg), ` +
      `${r.pgUs.toFixed(0).padStart(6)} µs its Postgres backends (${(r.pgUs / bare.pgUs).toFixed(2)}×), ` +
      `${r.otherUs.toFixed(0).padStart(6)} µs the rest of the machine (${(r.otherUs / bare.otherUs).toFixed(2)}×)   ${r.perSecond.toFixed(0).padStart(6)} deliveries/s`,
  );
}
printResult({ deliveries: N, rounds, concurrency: CONCURRENCY, variants: Object.fromEntries(best) });
