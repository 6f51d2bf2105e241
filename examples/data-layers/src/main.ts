// npm run start -w @inboxkit/example-data-layers: for each data layer, a fresh schema with the inbox and an
// orders table, 20 orders delivered three times each (twice at once), and what ended in the table.

import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { deliverTwice } from './deliver-twice.js';
import { ADAPTERS, openOrders } from './order-consumers.js';

const url = process.env['DATABASE_URL'];
if (url === undefined) throw new Error('DATABASE_URL is not set (npm run start sets it)');
const pool = new pg.Pool({ connectionString: url });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const orders = Array.from({ length: 20 }, (_, i) => ({ id: String(i), totalCents: 100 * i }));
let failed = false;
for (const adapter of ADAPTERS) {
  const schema = `example_${adapter.replace('-', '_')}_${Date.now()}`;
  await sql.raw(`CREATE SCHEMA "${schema}"`).execute(db);
  try {
    await migrateInbox(db, { schema });
    await sql
      .raw(`CREATE TABLE "${schema}".orders (id text PRIMARY KEY, total_cents int NOT NULL)`)
      .execute(db);
    const consumer = await openOrders(adapter, { url, schema });
    const result = await deliverTwice(consumer, orders);
    await consumer.close();
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".orders`);
    const ok = rows[0]!.n === orders.length && result.other.length === 0;
    failed ||= !ok;
    console.log(
      `${adapter.padEnd(12)} ${rows[0]!.n} orders in the table, ${result.processed} processed, ${result.duplicates} duplicates${ok ? '' : '  <-- WRONG'}`,
    );
  } finally {
    await sql.raw(`DROP SCHEMA "${schema}" CASCADE`).execute(db);
  }
}
await db.destroy();
process.exitCode = failed ? 1 : 0;
