// The cost of telling a handler's statement that ends its transaction (transactionControlIn), which every seam
// runs on each statement the handler sends through `context.tx` before sending it. No Postgres: the check is
// JavaScript only, and adds no round trip on any seam.
//
//   node --conditions=@inboxkit/source --import tsx packages/core/bench/transaction-control-check.ts [--calls 2000000]

import { parseArgs } from 'node:util';
import { transactionControlIn } from '../src/postgres/transaction-control.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '2000000' } } });
const calls = Number(values.calls);

const statements: readonly [string, string][] = [
  ['Kysely INSERT', 'insert into "s"."effects" ("consumer", "message_id") values ($1, $2)'],
  ['Knex INSERT … RETURNING', 'insert into "s"."effects" ("consumer", "message_id") values (?, ?) returning "seq"'],
  ['Prisma INSERT', 'INSERT INTO "s"."effects" ("consumer","message_id") VALUES ($1,$2) RETURNING "s"."effects"."seq"'],
  ['SELECT with CASE … END', 'select case when "paid" then $1 else $2 end from "orders" where "id" = $3'],
  ['two statements', 'insert into "t" ("a") values ($1); select 1'],
  ['COMMIT (found)', 'COMMIT'],
];

for (const [name, sql] of statements) {
  for (let i = 0; i < calls / 10; i++) transactionControlIn(sql);
  let found = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (transactionControlIn(sql) !== undefined) found++;
  const ns = Number(process.hrtime.bigint() - started) / calls;
  console.log(`${name.padEnd(26)} ${ns.toFixed(0).padStart(5)} ns a statement${found > 0 ? ' (transaction control)' : ''}`);
}
