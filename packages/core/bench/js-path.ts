// Core's own JavaScript per delivery, without Postgres: idempotentConsumer().handle() over PostgresInboxStore on a
// fake node-postgres connection that answers every statement at once (no socket, no server). What is left is
// the path's CPU — decode, fingerprint, SQL text, the pipeline runner, Kysely's handler transaction, outcome,
// metrics, hook — beside the same handler run in a bare Kysely transaction on the same fake. Steadier than a
// real-Postgres run on a busy machine, since no syscall or server time is in it; use it to see each change.
//
//   node --conditions=@inboxkit/source --import tsx packages/core/bench/js-path.ts [--deliveries 50000] [--rounds 5]
//     [--only 'once first']   (one variant alone, e.g. under --cpu-prof; a 'dup' one runs with its 'first')

import { parseArgs } from 'node:util';
import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  type Transaction,
} from 'kysely';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { statementHandler } from '../src/statement-handler.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';

const { values } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '50000' },
    rounds: { type: 'string', default: '5' },
    only: { type: 'string' },
  },
});
const N = Number(values.deliveries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = 16;

type Rows = Record<string, unknown>[];
const completed = new Set<string>();
let onceCalls = 0;
const fingerprints = new Map<string, string>();

/** What the fake server answers to one statement (statements of one query string come in order). */
function answer(statement: string): Rows {
  // The store's claim (its function's call), alone or inside a statement handler's one-round-trip call.
  const once = statement.includes('pg_temp.inboxkit_once(');
  const claim = /"inbox_claim"\('{1,2}(?:[^']|'{2,4})*'{1,2}::text, '{1,2}((?:[^']|'{2,4})*?)'{1,2}::text, '{1,2}([0-9a-f]+)'{1,2}::text/.exec(statement);
  if (claim !== null) {
    const [, id, fingerprint] = claim as unknown as [string, string, string];
    if (once) onceCalls += 1;
    if (!completed.has(id)) {
      completed.add(id);
      fingerprints.set(id, fingerprint);
      return [{ message_id: '', answer: 'c1 new' }];
    }
    return [{ message_id: '', answer: fingerprints.get(id) === fingerprint ? 'd' : 's{}' }];
  }
  if (statement === 'SELECT 1 AS a') return [{ a: 1 }];
  if (statement === 'SELECT 2 AS b') return [{ b: 2 }];
  return [];
}

interface Submittable {
  text?: string;
  submit?: (wire: unknown) => Error | null;
  handleError?: (error: Error) => void;
  callback?: (error: Error | null, results: unknown) => void;
}

/** Kysely's PostgresConnection, faked: the store's probe looks for this class name. */
class PostgresConnection implements DatabaseConnection {
  readonly #wire = { emit: () => true };

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    await Promise.resolve(); // a "round trip": the answer comes on a later microtask
    const q = compiled.sql as unknown as string | Submittable;
    if (typeof q === 'object') {
      if (typeof q.text === 'string' && q.callback !== undefined) {
        const results = q.text.split(/;\n?\s*/).map((s) => ({ command: s.trim().split(' ')[0], rows: answer(s.trim()) }));
        q.callback(null, results.length === 1 ? results[0] : results);
      } else {
        const error = q.submit?.(this.#wire);
        if (error) q.handleError?.(error);
      }
      return { rows: [] };
    }
    return { rows: answer(q) as R[], numAffectedRows: q.startsWith('insert') ? 1n : undefined };
  }

  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('not faked');
  }
}

const connections: PostgresConnection[] = [];
const driver: Driver = {
  init: async () => {},
  acquireConnection: async () => connections.pop() ?? new PostgresConnection(),
  beginTransaction: async (c) => void (await c.executeQuery(CompiledQuery.raw('begin'))),
  commitTransaction: async (c) => void (await c.executeQuery(CompiledQuery.raw('commit'))),
  rollbackTransaction: async (c) => void (await c.executeQuery(CompiledQuery.raw('rollback'))),
  releaseConnection: async (c) => void connections.push(c as PostgresConnection),
  destroy: async () => {},
};
const db = new Kysely<unknown>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => driver,
    createQueryCompiler: () => new PostgresQueryCompiler(),
    createIntrospector: (k) => new PostgresIntrospector(k),
  },
});

const effect = (tx: Kysely<unknown>, id: string) =>
  sql`INSERT INTO ${sql.table('bench.effects')} (message_id, amount) VALUES (${id}, 42)`.execute(tx);
const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
  name: 'cpu',
  store: new PostgresInboxStore<unknown>({ db, schema: 'bench' }),
  handler: async (message, { tx }) => void (await effect(tx, message.id)),
});
// The same effect as a statement handler (one round trip: the claim-and-statements function), its query given
// compiled, as the Kafka bench does, so that what is measured is the inbox's path and not a query builder's.
const once = idempotentConsumer<{ id: string; amount: number }, Transaction<unknown>>({
  name: 'cpu-once',
  store: new PostgresInboxStore<unknown>({ db, schema: 'bench' }),
  handler: statementHandler((m) =>
    CompiledQuery.raw('INSERT INTO bench.effects (message_id, amount) VALUES ($1, $2)', [
      m.id,
      m.payload.amount,
    ]),
  ),
});
const message = (id: string): InboundMessage => ({
  id,
  body: JSON.stringify({ id, amount: 42 }),
  headers: {},
  source: { transport: 'bench' },
});

async function drive(ids: readonly string[], work: (id: string) => Promise<void>): Promise<number> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await work(ids[next++]!);
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / ids.length;
}

/** One delivery through `c` that must end with `status`. */
function expecting(
  c: { handle(m: InboundMessage): Promise<{ status: string }> },
  status: 'processed' | 'duplicate',
) {
  return async (id: string): Promise<void> => {
    const o = await c.handle(message(id));
    if (o.status !== status) throw new Error(`expected ${status}, got ${o.status}`);
  };
}

const variants: Record<string, (round: number) => Promise<number>> = {
  'bare kysely tx': (r) =>
    drive(ids(`b${r}`), async (id) =>
      db
        .transaction()
        .execute((tx) => effect(tx, id))
        .then(() => undefined),
    ),
  'inbox first': (r) => drive(ids(`f${r}`), expecting(consumer, 'processed')),
  'inbox dup': (r) => drive(ids(`f${r}`), expecting(consumer, 'duplicate')),
  'once first': (r) => drive(ids(`o${r}`), expecting(once, 'processed')),
  'once dup': (r) => drive(ids(`o${r}`), expecting(once, 'duplicate')),
};
function ids(prefix: string): string[] {
  return Array.from({ length: N }, (_, i) => `${prefix}-${i}`);
}

/** `--only`'s variant; a duplicate variant brings its first-delivery one, which completes the ids it repeats. */
function selected(name: string): boolean {
  const only = values.only;
  return (
    only === undefined || name === only || (only.endsWith(' dup') && name === only.replace(/ dup$/, ' first'))
  );
}

const best = new Map<string, number>();
for (let r = -1; r < ROUNDS; r++) {
  for (const [name, run] of Object.entries(variants).filter(([n]) => selected(n))) {
    const us = await run(r);
    if (r >= 0) best.set(name, Math.min(best.get(name) ?? Infinity, us));
  }
}
for (const [name, us] of best)
  console.log(`${name.padEnd(15)} ${us.toFixed(1).padStart(7)} µs JS CPU per delivery`);
if (best.has('once first') && onceCalls === 0)
  throw new Error('the statement handler never took the one-round-trip path');
