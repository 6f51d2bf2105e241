// Each data layer's first delivery through inboxkit vs the same one-row effect through the same library
// without inboxkit (its own transaction: BEGIN, INSERT, COMMIT), side by side in alternating rounds.
//
//   node --conditions=@inboxkit/source --import tsx packages/data/bench/data-layers-bench.ts [--quick] [--only pg,knex]
//
// Every delivery is a new message id (no duplicates): the inbox's whole cost, claim and row, is in the ratio.
// Concurrency 16, one pool of 16 connections per library. Prints a Markdown table (median and min–max of the
// rounds) and one `ratio` line per library.

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { idempotentConsumer } from '@inboxkit/core';
import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { setting } from '../../../bench/settings.js';
import { ADAPTERS, openAdapter, type AdapterName } from '../test/fixtures/adapters.js';

const { values } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, only: { type: 'string' } },
});
const ROUNDS = values.quick ? 3 : 5;
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
console.log('| library | library alone (tx/s) | through inboxkit (deliveries/s) | ratio |');
console.log('|---|---|---|---|');
const ratios: string[] = [];
try {
  for (const name of names) {
    const adapter = await openAdapter(name, { url, schema, poolSize: CONCURRENCY });
    const consumer = idempotentConsumer<unknown, object>({
      name: `bench-${name}`,
      store: adapter.store,
      handler: async (message, { tx }) => adapter.applyEffect(tx, `bench-${name}`, message.id),
    });
    const alone: number[] = [];
    const inbox: number[] = [];
    const perRound: number[] = [];
    // A warm-up of each, then rounds that alternate which goes first.
    await rate(200, () =>
      adapter.transaction((tx) => adapter.applyEffect(tx, 'warm', 'w')).then(() => undefined),
    );
    await rate(
      200,
      async () =>
        void (await consumer.handle({
          id: randomUUID(),
          body: '{}',
          headers: {},
          source: { transport: 'bench' },
        })),
    );
    for (let round = 0; round < ROUNDS; round++) {
      const runAlone = () =>
        rate(PER_ROUND, () =>
          adapter.transaction((tx) => adapter.applyEffect(tx, `alone-${name}`, 'x')).then(() => undefined),
        );
      const runInbox = () =>
        rate(PER_ROUND, async () => {
          const outcome = await consumer.handle({
            id: randomUUID(),
            body: '{}',
            headers: {},
            source: { transport: 'bench' },
          });
          if (outcome.status !== 'processed')
            throw new Error(`${name}: ${JSON.stringify(outcome).slice(0, 300)}`);
        });
      let a: number;
      let b: number;
      if (round % 2 === 0) {
        a = await runAlone();
        b = await runInbox();
      } else {
        b = await runInbox();
        a = await runAlone();
      }
      alone.push(a);
      inbox.push(b);
      perRound.push(b / a);
    }
    await adapter.close();
    console.log(`| ${name} | ${spread(alone)} | ${spread(inbox)} | ${spread(perRound, 2)}× |`);
    ratios.push(
      `ratio ${name} ${median(perRound).toFixed(2)}× (target ≥ 0.8×); rounds ${Math.min(...perRound).toFixed(2)}–${Math.max(...perRound).toFixed(2)}`,
    );
  }
  console.log('');
  for (const line of ratios) console.log(line);
} finally {
  await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  await db.destroy();
}
