// npm run start -w @inboxkit/example-offline-checkout: the checkout page on http://127.0.0.1:3000 (PORT), its
// orders in the Postgres schema `offline_checkout_example`, until Ctrl-C.

import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { startCheckoutServer, type CheckoutDatabase } from './checkout-server.js';

const schema = 'offline_checkout_example';
const db = new Kysely<CheckoutDatabase>({
  // The orders table is looked up in the example's schema first.
  dialect: new PostgresDialect({
    pool: new pg.Pool({
      connectionString: process.env.DATABASE_URL,
      options: `-c search_path=${schema},public`,
    }),
  }),
});
await sql.raw(`CREATE SCHEMA IF NOT EXISTS ${schema}`).execute(db);
const server = await startCheckoutServer({ db, schema, port: Number(process.env.PORT ?? 3000) });
console.log(`offline checkout: open ${server.url} (Ctrl-C stops it)`);
console.log(
  'Try: DevTools → Network → Offline, place orders, reload, go back online; or double-click the button.',
);
process.once('SIGINT', () => void server.stop().then(() => db.destroy()));
