// billing-consumer.test.ts: prove the handler applies each message once, however it is delivered.
import { PGlite } from '@electric-sql/pglite';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { assertIdempotentHandler } from '@inboxkit/testing';
import { Kysely, sql } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import { expect, it } from 'vitest';

import { billingConsumer } from '../src/billing-consumer.js';
import type { Database } from '../src/billing-consumer.js';

it('bills each order exactly once', async () => {
  // PGlite: real Postgres in the test process, no server. Your CI's Postgres works the same way.
  const db = new Kysely<Database>({ dialect: new PGliteDialect(new PGlite()) });
  await migrateInbox(db);
  await sql`CREATE TABLE invoices (order_id text, amount_cents integer, message_id text)`.execute(db);
  const consumer = billingConsumer({ store: new PostgresInboxStore<Database>({ db }) });

  const report = await assertIdempotentHandler(
    consumer,
    ({ id }) => ({ id, body: JSON.stringify({ orderId: id, amountCents: 1_990 }) }),
    {
      countEffects: async ({ id }) =>
        (await db.selectFrom('invoices').select('order_id').where('message_id', '=', id).execute()).length,
    },
  );
  expect(report.passed).toBe(true);
  await db.destroy();
}, 120_000);
