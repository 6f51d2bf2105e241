// inboxkit's own JavaScript per message through the pg seam (@inboxkit/data/pg), without Postgres: handle() over
// a fake node-postgres pool whose clients answer every query on a later microtask (no socket, no server), beside
// the hand-written raw pg inbox (BEGIN + claim row in one query, the effect, COMMIT; a conflict rolls back) on
// the same fake. What is left is the CPU of each path's own code — node-postgres' is not in it (the fake
// replaces it), so the difference is inboxkit's per-delivery work alone. Steady on a loaded machine (no syscall,
// no server): the A/B figure of each change to that work (docs/benchmarks.md, "CPU per message").
//
//   node --import tsx packages/core/bench/pg-seam-js-path.ts [--deliveries 40000] [--rounds 5]
//   (built packages; --conditions=@inboxkit/source before --import for the TypeScript sources)

import { EventEmitter } from 'node:events';
import { parseArgs } from 'node:util';
import { fingerprintPayload, idempotentConsumer } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { pgSeam } from '@inboxkit/data/pg';
import type pg from 'pg';

const { values } = parseArgs({
  options: { deliveries: { type: 'string', default: '40000' }, rounds: { type: 'string', default: '5' } },
});
const N = Number(values.deliveries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;

const taken = new Set<string>();
const CLAIM = /"inbox_claim"\('(?:[^']|'')*'::text, '((?:[^']|'')*)'::text/;
const RAW = /VALUES \('cpu', '((?:[^']|'')*)'/;

/** The fake server's answer to one statement of a query. */
function result(statement: string): { command: string; rows: Record<string, unknown>[]; rowCount: number } {
  const command = statement.trimStart().split(/\s/, 1)[0]!.toUpperCase();
  const claim = CLAIM.exec(statement) ?? RAW.exec(statement);
  if (claim !== null) {
    const first = !taken.has(claim[1]!);
    if (first) taken.add(claim[1]!);
    if (statement.includes('inbox_claim')) return { command: 'SELECT', rows: [{ message_id: '', answer: first ? 'c1 new' : 'd' }], rowCount: 1 };
    return { command, rows: first ? [{ '?column?': 1 }] : [], rowCount: first ? 1 : 0 };
  }
  return { command, rows: [], rowCount: command === 'INSERT' ? 1 : 0 };
}

/** A node-postgres PoolClient, faked: `query` answers on a later microtask, as a round trip would. */
class FakeClient extends EventEmitter {
  #status: 'I' | 'T' = 'I';

  async query(text: string, _values?: unknown[]): Promise<unknown> {
    await Promise.resolve();
    const statements = text.split(/;\n?\s*(?=[A-Z])/).filter((s) => s.trim() !== '');
    const results = statements.map(result);
    for (const r of results) {
      if (r.command === 'BEGIN') this.#status = 'T';
      if (r.command === 'COMMIT' || r.command === 'ROLLBACK') this.#status = 'I';
    }
    return results.length === 1 ? results[0] : results;
  }

  getTransactionStatus(): 'I' | 'T' {
    return this.#status;
  }

  release(): void {
    idle.push(this);
  }
}

const idle: FakeClient[] = [];
const pool = {
  connect: async () => idle.pop() ?? new FakeClient(),
  query: async (text: string) => new FakeClient().query(text),
  totalCount: 0,
} as unknown as pg.Pool;

const consumer = idempotentConsumer<{ id: string; amount: number }, pg.PoolClient>({
  name: 'cpu',
  store: new PostgresInboxStore<unknown, pg.PoolClient>({ seam: pgSeam(pool), schema: 'fake' }),
  handler: async (m, { tx }) => {
    await tx.query('INSERT INTO fake.effects (message_id, amount) VALUES ($1, $2)', [m.id, m.payload.amount]);
  },
});

const payload = (id: string) => ({ id, amount: 42 });
const message = (id: string): InboundMessage => ({ id, body: JSON.stringify(payload(id)), headers: {}, source: { transport: 'bench' } });
const literal = (v: string): string => `'${v.replaceAll("'", "''")}'`;

async function rawInbox(id: string): Promise<void> {
  const client = (await pool.connect()) as unknown as FakeClient;
  try {
    const results = (await client.query(
      `BEGIN; INSERT INTO fake.raw (consumer, message_id, fingerprint, expires_at) VALUES ('cpu', ${literal(id)}, '${fingerprintPayload(payload(id))}', now() + interval '7 days') ON CONFLICT DO NOTHING RETURNING 1`,
    )) as pg.QueryResult[];
    if (results[1]!.rowCount === 0) {
      await client.query('ROLLBACK');
      return;
    }
    await client.query('INSERT INTO fake.effects (message_id, amount) VALUES ($1, $2)', [id, 42]);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

async function handle(id: string): Promise<void> {
  const o = await consumer.handle(message(id));
  if (o.status !== 'processed' && o.status !== 'duplicate') throw new Error(`${id}: ${JSON.stringify(o)}`);
}

async function cpuPer(prefix: string, work: (id: string) => Promise<void>): Promise<number> {
  let next = 0;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < N) await work(`${prefix}-${next++}`);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / N;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: readonly number[], digits = 1): string =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

for (let i = 0; i < 3; i++) {
  await cpuPer(`warm${i}-h`, handle);
  await cpuPer(`warm${i}-w`, rawInbox);
}
const figures = new Map<string, number[]>();
const add = (name: string, v: number): void => void figures.set(name, [...(figures.get(name) ?? []), v]);
for (let round = 0; round < ROUNDS; round++) {
  const inboxFirst = round % 2 === 0;
  for (const side of inboxFirst ? ['h', 'w'] : ['w', 'h']) {
    const work = side === 'h' ? handle : rawInbox;
    const label = side === 'h' ? 'handle() pg seam' : 'raw pg inbox';
    add(`${label}, first`, await cpuPer(`r${round}-${side}`, work));
    add(`${label}, duplicate`, await cpuPer(`r${round}-${side}`, work));
  }
}
for (const [name, xs] of figures) console.log(`${name}: ${fmt(xs)} µs`);
for (const kind of ['first', 'duplicate']) {
  const a = figures.get(`handle() pg seam, ${kind}`)!;
  const b = figures.get(`raw pg inbox, ${kind}`)!;
  console.log(`inboxkit's own JS per ${kind}: ${fmt(a.map((v, i) => v - b[i]!))} µs over the raw inbox's`);
}
