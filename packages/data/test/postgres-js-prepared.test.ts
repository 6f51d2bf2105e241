// The postgres.js seam prepares the store's own statements on each connection, as postgres.js' tagged templates
// are (unprepared, postgres.js sends a statement with parameters in two round trips: Parse and Describe first,
// for the parameters' types), and leaves them unprepared when the application's `sql` says `prepare: false`.

import { idempotentConsumer } from '@inboxkit/core';
import { postgresJsInboxStore } from '@inboxkit/data/postgres-js';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('postgres_js_prepared');
});
afterAll(async () => {
  await t?.close();
});

/** Handles two new messages on a one-connection `sql`; how many claim statements are prepared on it. */
async function claimsPreparedAfterTwoDeliveries(options: { readonly prepare?: boolean }): Promise<number> {
  const sql = postgres(t.url, { ...options, max: 1, onnotice: () => {} });
  try {
    const consumer = idempotentConsumer<unknown, postgres.TransactionSql>({
      name: `prepared-${options.prepare === false ? 'off' : 'on'}`,
      store: postgresJsInboxStore({ sql, schema: t.schema }),
      handler: async () => {},
    });
    for (const id of ['a', 'b']) {
      const outcome = await consumer.handle({ id, body: '{}', headers: {}, source: { transport: 'test' } });
      expect(outcome.status).toBe('processed');
    }
    // The same connection (max: 1) answers for its own session.
    // (This statement is prepared too, and names the claim: left out.)
    const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%_claim"(%' AND statement NOT LIKE '%pg_prepared_statements%'`;
    return row!.n;
  } finally {
    await sql.end();
  }
}

describe('the postgres.js seam', () => {
  it("prepares the store's claim on the connection, as postgres.js' tagged templates are", async () => {
    expect(await claimsPreparedAfterTwoDeliveries({})).toBe(1);
  });

  it('leaves it unprepared when the application made its sql with prepare: false', async () => {
    expect(await claimsPreparedAfterTwoDeliveries({ prepare: false })).toBe(0);
  });
});
