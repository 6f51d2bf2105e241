// Consumer memory over a long run: --messages deliveries (30% duplicates of recent ids) straight through
// idempotentConsumer().handle() at concurrency 16, in this process alone. RSS is sampled every 500 ms; heap
// after a full GC at every tenth sample (with the in-memory store's completed rows pruned just before, so
// only what the consumer path keeps remains). Reports start (after warm-up), end and max RSS and the slope (least
// squares, MB per million messages).
//   --store memory    core's InMemoryInboxStore with a one-second dedupe window and the in-process pruner, so
//                     the store's own rows stay bounded and what grows, if anything, is the consumer path
//                     (decode, fingerprint, schema, claim, handler context, outcome, metrics, hooks);
//   --store postgres  PostgresInboxStore and a one-row effect insert in the handler's transaction, in the
//                     bench's own schema (slower: fewer messages fit in the same time).
//
//   node --expose-gc --conditions=@inboxkit/source --import tsx bench/memory-run.ts [--messages 1000000]
//     [--store memory|postgres]

import { parseArgs } from 'node:util';

import { idempotentConsumer, startPruner } from '@inboxkit/core';
import type { InboundMessage } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import type { InMemoryTransaction } from '@inboxkit/core/memory';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';
import { z } from 'zod';

import { printResult, setting } from './settings.js';

const { values } = parseArgs({
  options: { messages: { type: 'string', default: '1000000' }, store: { type: 'string', default: 'memory' } },
});
const total = Number(values.messages);
const usePostgres = values.store === 'postgres';
const CONCURRENCY = 16;
const WARM_UP = Math.min(100_000, Math.round(total * 0.1));
const gc = (globalThis as { gc?: () => void }).gc;

const schema = z.object({ id: z.string(), amount: z.number().int() });
type Payload = z.infer<typeof schema>;
let effects = 0;
const common = {
  name: 'memory',
  schema,
  maxAttempts: 3,
  backoff: { initialDelayMs: 10, maxDelayMs: 100 },
  hooks: { onOutcome: () => undefined },
};

// The store's clock runs ahead at each heap checkpoint, so that every completed row can be pruned first and
// the heap after GC holds the consumer path and an empty store, whatever the delivery rate was just then.
let clockAhead = 0;
const memoryStore = new InMemoryInboxStore({ clock: () => Date.now() + clockAhead });
const pgSchema = `bench_mem_${randomBytes(4).toString('hex')}`;
const pool = usePostgres ? new pg.Pool({ connectionString: setting('DATABASE_URL'), max: 16 }) : undefined;
const db = pool ? new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) }) : undefined;
if (db !== undefined) {
  await migrateInbox(db, { schema: pgSchema });
  await sql
    .raw(
      `CREATE TABLE "${pgSchema}".effects (id bigserial PRIMARY KEY, message_id text NOT NULL, amount int NOT NULL)`,
    )
    .execute(db);
}
const consumer = usePostgres
  ? idempotentConsumer<Payload, Transaction<unknown>>({
      ...common,
      store: new PostgresInboxStore<unknown>({ db: db!, schema: pgSchema }),
      handler: async (message, { tx }) => {
        await sql`INSERT INTO ${sql.table(`${pgSchema}.effects`)} (message_id, amount) VALUES (${message.id}, ${message.payload.amount})`.execute(
          tx,
        );
        effects += 1;
      },
    })
  : idempotentConsumer<Payload, InMemoryTransaction>({
      ...common,
      store: memoryStore,
      // Short window and retry horizon: completed rows older than a second are pruned twice a second.
      dedupeWindowMs: 1_000,
      handler: async (_message, { tx }) => {
        tx.onCommit(() => (effects += 1));
      },
    });
const pruner = usePostgres ? undefined : startPruner(memoryStore, { intervalMs: 500, jitter: 0 });

/** A duplicate repeats an id sent 16–1,000 deliveries earlier. */
function idAt(i: number): string {
  if (i > 1_000 && Math.random() < 0.3) return `m-${i - 16 - Math.floor(Math.random() * 984)}`;
  return `m-${i}`;
}

function message(id: string): InboundMessage {
  return {
    id,
    body: JSON.stringify({ id, amount: 42 }),
    headers: { 'content-type': 'application/json' },
    source: { transport: 'bench' },
  };
}

interface Sample {
  readonly messages: number;
  readonly seconds: number;
  readonly rssMb: number;
  readonly heapMb: number;
}

const samples: Sample[] = [];
const afterGc: Sample[] = [];
let sent = 0;
const t0 = performance.now();
const sample = (): Sample => {
  const m = process.memoryUsage();
  return {
    messages: sent,
    seconds: (performance.now() - t0) / 1000,
    rssMb: m.rss / 2 ** 20,
    heapMb: m.heapUsed / 2 ** 20,
  };
};
let checkpointing = false;
/** Heap after a full GC, with the in-memory store emptied of completed rows first. */
async function checkpoint(): Promise<void> {
  if (pruner !== undefined) {
    clockAhead += 60_000;
    await pruner.runNow();
  }
  gc?.();
  afterGc.push(sample());
}
const sampler = setInterval(() => {
  samples.push(sample());
  if (samples.length % 10 === 0 && gc !== undefined && !checkpointing) {
    checkpointing = true;
    void checkpoint().finally(() => (checkpointing = false));
  }
}, 500);
const outcomes: Record<string, number> = {};
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (sent < total) {
      const i = sent++;
      // The in-memory store never waits on I/O: yield now and then, as a transport's socket reads would, so
      // that timers (the sampler, the pruner) run.
      if (i % 64 === 0) await new Promise((resolve) => setImmediate(resolve));
      const outcome = await consumer.handle(message(idAt(i)));
      outcomes[outcome.status] = (outcomes[outcome.status] ?? 0) + 1;
    }
  }),
);
clearInterval(sampler);
while (checkpointing) await new Promise((resolve) => setTimeout(resolve, 10));
samples.push(sample());
await checkpoint();
await pruner?.stop();
const seconds = (performance.now() - t0) / 1000;

/** Least-squares slope of y over messages, in MB per million messages. */
function slope(points: readonly Sample[], y: (s: Sample) => number): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((a, p) => a + p.messages, 0) / n;
  const my = points.reduce((a, p) => a + y(p), 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.messages - mx) * (y(p) - my);
    den += (p.messages - mx) ** 2;
  }
  return (num / den) * 1_000_000;
}

const steady = samples.filter((s) => s.messages >= WARM_UP);
const steadyGc = afterGc.filter((s) => s.messages >= WARM_UP);
const result = {
  messages: total,
  seconds,
  perSecond: total / seconds,
  concurrency: CONCURRENCY,
  outcomes,
  warmUp: WARM_UP,
  rssStartMb: steady[0]?.rssMb,
  rssEndMb: samples.at(-1)!.rssMb,
  rssMaxMb: Math.max(...samples.map((s) => s.rssMb)),
  rssSlopeMbPerMillion: slope(steady, (s) => s.rssMb),
  // RSS saws with the garbage collector; growth shows as higher peaks in the second half than in the first.
  rssFirstHalfMaxMb: Math.max(
    ...steady.filter((s) => s.messages < (WARM_UP + total) / 2).map((s) => s.rssMb),
  ),
  rssSecondHalfMaxMb: Math.max(
    ...steady.filter((s) => s.messages >= (WARM_UP + total) / 2).map((s) => s.rssMb),
  ),
  heapAfterGcStartMb: steadyGc[0]?.heapMb,
  heapAfterGcEndMb: steadyGc.at(-1)?.heapMb,
  heapAfterGcSlopeMbPerMillion: slope(steadyGc, (s) => s.heapMb),
  effects,
  store: usePostgres ? 'postgres' : 'memory',
  storeRowsAtEnd: usePostgres
    ? undefined
    : (await memoryStore.countByStatus({ consumer: 'memory' })).reduce((a, c) => a + c.count, 0),
  gcExposed: gc !== undefined,
  series: samples
    .filter((_, i) => i % Math.max(1, Math.floor(samples.length / 40)) === 0)
    .map((s) => [s.messages, Math.round(s.rssMb)]),
};
console.log(
  `${total.toLocaleString('en-US')} messages in ${seconds.toFixed(0)} s (${(total / seconds).toFixed(0)}/s): ` +
    `RSS start ${result.rssStartMb?.toFixed(0)} MB (after ${WARM_UP.toLocaleString('en-US')}), end ${result.rssEndMb.toFixed(0)} MB, ` +
    `max ${result.rssMaxMb.toFixed(0)} MB, slope ${result.rssSlopeMbPerMillion.toFixed(1)} MB per million; ` +
    `heap after GC ${result.heapAfterGcStartMb?.toFixed(1)} → ${result.heapAfterGcEndMb?.toFixed(1)} MB (slope ${result.heapAfterGcSlopeMbPerMillion.toFixed(1)} MB per million)`,
);
if (db !== undefined) {
  await sql.raw(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`).execute(db);
  await db.destroy();
}
printResult(result);
