// Each data layer's first delivery through inboxkit vs the same one-row effect through the same library
// without inboxkit, side by side in alternating rounds (the order reversed every other round):
//   alone      the library's own transaction: BEGIN, the effect, COMMIT (the target's reference)
//   by hand    the same transaction with a hand-written inbox in it: the inbox's hot row as a plain INSERT …
//              ON CONFLICT DO NOTHING RETURNING sent through the library, then the effect if the row was new —
//              the least any correct inbox adds (a second floor: what inboxkit costs over the SQL it must send)
//   inboxkit   idempotentConsumer().handle() over the library's adapter, the handler writing the effect
//   --ab-pipelining adds inboxkit with `pipelining: 'off'` (pg, Drizzle on node-postgres, Knex, TypeORM): the A/B
//   of sending the claim with BEGIN.
//
//   node --conditions=@inboxkit/source --import tsx packages/data/bench/data-layers-bench.ts [--quick]
//     [--only pg,knex] [--rounds 5] [--ab-pipelining]
//
// Every delivery is a new message id (no duplicates): the inbox's whole cost, claim and row, is in the ratio.
// Concurrency 16, one pool of 16 connections per library. Prints a Markdown table (median and min–max of the
// rounds' rates and of the per-round ratios) and one `ratio` line per library.

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { idempotentConsumer } from '@inboxkit/core';
import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { setting } from '../../../bench/settings.js';
import { ADAPTERS, openAdapter, type AdapterName } from '../test/fixtures/adapters.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    rounds: { type: 'string' },
    'ab-pipelining': { type: 'boolean', default: false },
  },
});
const ROUNDS = values.rounds !== undefined ? Number(values.rounds) : values.quick ? 3 : 5;
const PIPELINED = new Set(['pg', 'drizzle', 'knex', 'typeorm']);
const PER_ROUND = values.quick ? 800 : 3_000;
const CONCURRENCY = 16;
const names = (values.only?.split(',') ??
  Object.keys(ADAPTERS).filter((n) => n !== 'drizzle-postgres-js')) as AdapterName[];

const url = setting('DATABASE_URL');
const admin = new pg.Pool({ connectionString: url, max: 2 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: admin }) });
const schema = `bench_data_${Date.now()}`;
await sql.raw(`CREATE SCHEMA "${schema}"`).execute(db);
await migrateInbox(db, { schema });
await sql
  .raw(
    `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`,
  )
  .execute(db);

/** Runs `count` tasks, `CONCURRENCY` at a time; resolves to tasks per second. */
async function rate(count: number, task: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) await task(next++);
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const spread = (xs: number[], digits = 0): string =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

console.log(`Data layers: first delivery through inboxkit vs the same effect through the library alone`);
console.log(
  `${ROUNDS} alternating rounds × ${PER_ROUND} deliveries, concurrency ${CONCURRENCY}, pool 16 each\n`,
);
const abHeader = values['ab-pipelining'] ? ' pipelining off (deliveries/s) | pipelining on / off |' : '';
console.log(
  `| library | library alone (tx/s) | hand-written inbox (tx/s) | through inboxkit (deliveries/s) | inboxkit / alone | by hand / alone | inboxkit / by hand |${abHeader}`,
);
console.log(`|---|---|---|---|---|---|---|${values['ab-pipelining'] ? '---|---|' : ''}`);
const ratios: string[] = [];

/** A consumer over `store` whose handler writes the effect through the library's `tx`. */
function consumerOf(name: string, adapter: Awaited<ReturnType<typeof openAdapter>>) {
  return idempotentConsumer<unknown, object>({
    name: `bench-${name}`,
    store: adapter.store,
    handler: async (message, { tx }) => adapter.applyEffect(tx, `bench-${name}`, message.id),
  });
}

try {
  for (const name of names) {
    const adapter = await openAdapter(name, { url, schema, poolSize: CONCURRENCY });
    const ab = values['ab-pipelining'] && PIPELINED.has(name);
    const off = ab
      ? await openAdapter(name, { url, schema, poolSize: CONCURRENCY, pipelining: 'off' })
      : undefined;
    const consumer = consumerOf(name, adapter);
    const consumerOff = off && consumerOf(name, off);
    const deliver = (c: typeof consumer) => async () => {
      const outcome = await c.handle({
        id: randomUUID(),
        body: '{}',
        headers: {},
        source: { transport: 'bench' },
      });
      if (outcome.status !== 'processed')
        throw new Error(`${name}: ${JSON.stringify(outcome).slice(0, 300)}`);
    };
    const sides: Record<string, () => Promise<void>> = {
      alone: () =>
        adapter.transaction((tx) => adapter.applyEffect(tx, `alone-${name}`, 'x')).then(() => undefined),
      byHand: () =>
        adapter
          .transaction(async (tx) => {
            const id = randomUUID();
            if (await adapter.claimByHand(tx, `hand-${name}`, id))
              await adapter.applyEffect(tx, `hand-${name}`, id);
          })
          .then(() => undefined),
      inbox: deliver(consumer),
      ...(consumerOff && { off: deliver(consumerOff) }),
    };
    const order = Object.keys(sides);
    const rates: Record<string, number[]> = Object.fromEntries(order.map((k) => [k, []]));
    // A warm-up of each, then rounds that alternate the order.
    for (const side of order) await rate(200, sides[side]!);
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of round % 2 === 0 ? order : [...order].reverse()) {
        rates[side]!.push(await rate(PER_ROUND, sides[side]!));
      }
    }
    await adapter.close();
    await off?.close();
    const per = (a: string, b: string) => rates[a]!.map((r, i) => r / rates[b]![i]!);
    const inboxAlone = per('inbox', 'alone');
    const abCells = ab
      ? ` ${spread(rates.off!)} | ${spread(per('inbox', 'off'), 2)}× |`
      : values['ab-pipelining']
        ? ' – | – |'
        : '';
    console.log(
      `| ${name} | ${spread(rates.alone!)} | ${spread(rates.byHand!)} | ${spread(rates.inbox!)} | ${spread(inboxAlone, 2)}× | ${spread(per('byHand', 'alone'), 2)}× | ${spread(per('inbox', 'byHand'), 2)}× |${abCells}`,
    );
    ratios.push(
      `ratio ${name} ${median(inboxAlone).toFixed(2)}× (target ≥ 0.8×); rounds ${Math.min(...inboxAlone).toFixed(2)}–${Math.max(...inboxAlone).toFixed(2)}`,
    );
  }
  console.log('');
  for (const line of ratios) console.log(line);
} finally {
  await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  await db.destroy();
}
