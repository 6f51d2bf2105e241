// Where a data layer's first delivery goes, through inboxkit, alone (the same one-row effect in the library's
// own transaction) and with a hand-written inbox (that transaction plus the inbox's hot row as a plain INSERT …
// ON CONFLICT DO NOTHING, the least any correct inbox sends), per delivery:
// - the wire: a TCP relay between the library's pool and Postgres reads the protocol both ways and counts round
//   trips (ReadyForQuery answers), simple queries, extended-protocol executions and parses, and the statement
//   texts (one delivery at a time, `--n` of each after a warm-up: connections opened, statements prepared);
// - the CPU: Node's (process.cpuUsage) and the library's Postgres backends' (/proc/<pid>/stat), at concurrency
//   16 straight to Postgres, `--cpu-n` deliveries of each in two halves (A H B B H A).
//
//   node --conditions=@inboxkit/source --import tsx packages/data/bench/data-layers-profile.ts [--only pg,knex]
//     [--n 200] [--cpu-n 3000]

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { idempotentConsumer } from '@inboxkit/core';
import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { setting } from '../../../bench/settings.js';
import { ADAPTERS, openAdapter, type AdapterName } from '../test/fixtures/adapters.js';

const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    n: { type: 'string', default: '200' },
    'cpu-n': { type: 'string', default: '3000' },
  },
});
const N = Number(values.n);
const CPU_N = Number(values['cpu-n']);
const CONCURRENCY = 16;
const names = (values.only?.split(',') ?? Object.keys(ADAPTERS)) as AdapterName[];

/** Counts of one side of the wire. */
class Counts {
  readonly messages = new Map<string, number>();
  readonly texts = new Map<string, number>();
  reset(): void {
    this.messages.clear();
    this.texts.clear();
  }
  add(type: string, body: Buffer): void {
    this.messages.set(type, (this.messages.get(type) ?? 0) + 1);
    // Simple query: the text; Parse: the statement name, then the text.
    let text: string | undefined;
    if (type === 'Q') text = cstring(body, 0).value;
    if (type === 'P') {
      const name = cstring(body, 0);
      text = `${name.value ? `[named ${name.value}] ` : ''}${cstring(body, name.next).value}`;
    }
    if (text !== undefined) {
      const key = text
        .replace(/\s+/g, ' ')
        .replace(/'[^']*'/g, "'…'")
        .slice(0, 110);
      this.texts.set(key, (this.texts.get(key) ?? 0) + 1);
    }
  }
}

function cstring(buffer: Buffer, at: number): { value: string; next: number } {
  const end = buffer.indexOf(0, at);
  return { value: buffer.toString('utf8', at, end), next: end + 1 };
}

/** Splits a protocol stream into messages (after the startup packet on the client side). */
function reader(counts: Counts, startup: boolean): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let first = startup;
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (first) {
        if (pending.length < 4) return;
        const length = pending.readInt32BE(0);
        if (pending.length < length) return;
        const code = pending.readInt32BE(4);
        pending = pending.subarray(length);
        // SSLRequest (80877103) is answered with one byte 'N' and followed by the real startup packet.
        if (code !== 80877103) first = false;
        continue;
      }
      if (pending.length < 5) return;
      const length = pending.readInt32BE(1);
      if (pending.length < length + 1) return;
      counts.add(String.fromCharCode(pending[0]!), pending.subarray(5, length + 1));
      pending = pending.subarray(length + 1);
    }
  };
}

const target = new URL(setting('DATABASE_URL'));
const client = new Counts();
const server = new Counts();
const relay = net.createServer((socket) => {
  const upstream = net.connect(Number(target.port), target.hostname);
  socket.setNoDelay(true);
  upstream.setNoDelay(true);
  const fromClient = reader(client, true);
  const fromServer = reader(server, false);
  let sslAnswered = false;
  socket.on('data', (chunk) => {
    fromClient(chunk);
    upstream.write(chunk);
  });
  upstream.on('data', (chunk) => {
    // The server's one-byte SSL refusal precedes its messages.
    if (!sslAnswered && chunk.length >= 1 && chunk[0] === 0x4e && chunk.length === 1) {
      sslAnswered = true;
    } else fromServer(chunk);
    socket.write(chunk);
  });
  socket.on('error', () => upstream.destroy());
  upstream.on('error', () => socket.destroy());
  socket.on('close', () => upstream.destroy());
  upstream.on('close', () => socket.destroy());
});
await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
const relayed = new URL(target);
relayed.hostname = '127.0.0.1';
relayed.port = String((relay.address() as net.AddressInfo).port);
const url = relayed.toString();

const admin = new pg.Pool({ connectionString: target.toString(), max: 1 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: admin }) });
const schema = `wire_${Date.now()}`;
await sql.raw(`CREATE SCHEMA "${schema}"`).execute(db);
await migrateInbox(db, { schema });
await sql
  .raw(
    `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`,
  )
  .execute(db);

const per = (n: number | undefined): string => ((n ?? 0) / N).toFixed(2);
function report(label: string): void {
  const execs = client.messages.get('E') ?? 0;
  console.log(
    `  ${label}: round trips ${per(server.messages.get('Z'))}, simple queries ${per(client.messages.get('Q'))}, executes ${per(execs)}, parses ${per(client.messages.get('P'))}, syncs ${per(client.messages.get('S'))}`,
  );
  for (const [text, count] of [...client.texts].sort((a, b) => b[1] - a[1])) {
    console.log(`      ${per(count)} × ${text}`);
  }
}

/** Pids of the client backends other than the admin pool's. */
async function backendPids(): Promise<number[]> {
  const { rows } = await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()`,
  );
  return rows.map((r) => r.pid);
}

/** CPU time (µs) of `pids` so far (utime + stime, USER_HZ = 100). */
function cpuOf(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      return Number.NaN;
    }
  }
  return ticks * 10_000;
}

interface Cost {
  nodeUs: number;
  pgUs: number;
  seconds: number;
}

/** Runs `count` tasks at concurrency 16, adding their Node and backend CPU to `cost`. */
async function measure(cost: Cost, pids: readonly number[], count: number, task: () => Promise<unknown>) {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const pg0 = cpuOf(pids);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) await task();
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  cost.seconds += (performance.now() - t0) / 1000;
  cost.nodeUs += cpu.user + cpu.system;
  cost.pgUs += cpuOf(pids) - pg0;
}

try {
  for (const name of names) {
    if (CPU_N > 0) {
      const direct = await openAdapter(name, { url: target.toString(), schema, poolSize: CONCURRENCY });
      const consumer = idempotentConsumer<unknown, object>({
        name: `cpu-${name}`,
        store: direct.store,
        handler: async (message, { tx }) => direct.applyEffect(tx, `cpu-${name}`, message.id),
      });
      const deliver = () =>
        consumer.handle({ id: randomUUID(), body: '{}', headers: {}, source: { transport: 'bench' } });
      const alone = () => direct.transaction((tx) => direct.applyEffect(tx, `alone-${name}`, 'x'));
      const byHand = () =>
        direct.transaction(async (tx) => {
          const id = randomUUID();
          if (await direct.claimByHand(tx, `hand-${name}`, id))
            await direct.applyEffect(tx, `hand-${name}`, id);
        });
      await Promise.all(Array.from({ length: 200 }, () => alone()));
      await Promise.all(Array.from({ length: 200 }, () => byHand()));
      await Promise.all(Array.from({ length: 200 }, () => deliver()));
      const pids = await backendPids();
      const a: Cost = { nodeUs: 0, pgUs: 0, seconds: 0 };
      const h: Cost = { nodeUs: 0, pgUs: 0, seconds: 0 };
      const b: Cost = { nodeUs: 0, pgUs: 0, seconds: 0 };
      // A, H, B, B, H, A: each half of each side.
      await measure(a, pids, CPU_N / 2, alone);
      await measure(h, pids, CPU_N / 2, byHand);
      await measure(b, pids, CPU_N / 2, deliver);
      await measure(b, pids, CPU_N / 2, deliver);
      await measure(h, pids, CPU_N / 2, byHand);
      await measure(a, pids, CPU_N / 2, alone);
      const line = (label: string, c: Cost) =>
        `  ${label}: Node ${(c.nodeUs / CPU_N).toFixed(0)} µs, backends ${(c.pgUs / CPU_N).toFixed(0)} µs per delivery, ${(CPU_N / c.seconds).toFixed(0)}/s (${pids.length} backends)`;
      console.log(`${name} (CPU, concurrency ${CONCURRENCY})`);
      console.log(line('alone          ', a));
      console.log(line('by hand        ', h));
      console.log(line('through inboxkit', b));
      await direct.close();
    }
    const adapter = await openAdapter(name, { url, schema, poolSize: 4 });
    const consumer = idempotentConsumer<unknown, object>({
      name: `wire-${name}`,
      store: adapter.store,
      handler: async (message, { tx }) => adapter.applyEffect(tx, `wire-${name}`, message.id),
    });
    const deliver = async (): Promise<void> => {
      const outcome = await consumer.handle({
        id: randomUUID(),
        body: '{}',
        headers: {},
        source: { transport: 'bench' },
      });
      if (outcome.status !== 'processed') throw new Error(`${name}: ${JSON.stringify(outcome)}`);
    };
    const alone = (): Promise<unknown> =>
      adapter.transaction((tx) => adapter.applyEffect(tx, `alone-${name}`, 'x'));
    // Warm-up: every pooled connection opened, every statement prepared.
    await Promise.all(Array.from({ length: 8 }, () => alone()));
    await Promise.all(Array.from({ length: 8 }, () => deliver()));
    console.log(`${name} (wire, one at a time)`);
    client.reset();
    server.reset();
    for (let i = 0; i < N; i++) await alone();
    report('alone          ');
    client.reset();
    server.reset();
    for (let i = 0; i < N; i++) await deliver();
    report('through inboxkit');
    await adapter.close();
  }
} finally {
  await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  await db.destroy();
  relay.close();
}
