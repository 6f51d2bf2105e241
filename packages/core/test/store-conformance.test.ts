// The store conformance suite against every store core ships, over the Postgres store's options: real Postgres
// (each fast path on, and off), PGlite and in-memory; statement handlers where the store's transaction runs SQL;
// and a seam of another shape: a callback-style library's (docs/core.md, "Implementing a seam").

import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { describeInboxStoreConformance } from '../../testing/src/store-conformance.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import { PostgresInboxStore, type PostgresInboxStoreOptions } from '../src/postgres/index.js';
import { callbackSeam, pgCallbackLibrary } from './support/callback-seam.js';
import { openPglite } from './support/pglite.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from './support/postgres.js';

describeInboxStoreConformance<InMemoryTransaction>('in-memory', async () => {
  const store = new InMemoryInboxStore();
  return {
    store,
    // An in-memory store's rows live in its instance: any other instance is another inbox.
    otherInbox: () => new InMemoryInboxStore(),
    applyEffect: async (tx, _consumer, messageId) => tx.stage({ messageId }),
    countEffects: async (consumer, messageId) => store.countEffects(consumer, messageId),
  };
});

const failStatementQuietly = async (tx: TestTx): Promise<void> => {
  await sql`SELECT 1 / 0`.execute(tx).catch(() => undefined);
};

const sendStatement = (tx: TestTx, text: string): Promise<unknown> => sql.raw(text).execute(tx);

let pglite: { db: Kysely<TestDB>; schema: string; close(): Promise<void> } | undefined;
afterAll(async () => {
  await pglite?.close();
});

describeInboxStoreConformance<TestTx>('PGlite', async () => {
  // One PGlite for the file (it takes a second to start); tests are isolated by consumer name.
  pglite ??= await openPglite();
  const { db, schema } = pglite;
  return {
    store: new PostgresInboxStore({ db, schema }),
    applyEffect: (tx, consumer, messageId) => insertEffect(tx, schema, consumer, messageId),
    countEffects: (consumer, messageId) => countEffects(db, schema, consumer, messageId),
    statementEffect: (consumer, messageId) => db.withSchema(schema).insertInto('effects').values({ consumer, message_id: messageId }),
    failStatementQuietly,
    sendStatement,
  };
});

let postgres: TestDatabase;
beforeAll(async () => {
  postgres = await openTestDatabase('conformance');
});
afterAll(async () => {
  await postgres?.close();
});

const options: [string, Partial<PostgresInboxStoreOptions<TestDB>>][] = [
  ['defaults', {}],
  ["pipelining: 'off' (no fast path)", { pipelining: 'off' }],
  ['temporaryFunctions: false', { temporaryFunctions: false }],
  ["batchSavepoints: 'always'", { batchSavepoints: 'always' }],
];
for (const [label, option] of options) {
  describeInboxStoreConformance<TestTx>(`Postgres, ${label}`, async () => {
    const { db, schema } = postgres;
    return {
      store: new PostgresInboxStore({ db, schema, ...option }),
      sameInbox: () => new PostgresInboxStore({ db, schema }),
      otherInbox: () => new PostgresInboxStore({ db, schema: `${schema}_other` }),

      applyEffect: (tx, consumer, messageId) => insertEffect(tx, schema, consumer, messageId),
      countEffects: (consumer, messageId) => countEffects(db, schema, consumer, messageId),
      statementEffect: (consumer, messageId) => db.withSchema(schema).insertInto('effects').values({ consumer, message_id: messageId }),
      failStatementQuietly,
      sendStatement,
    };
  });
}

// The partitioned layout (daily partitions by the message's timestamp) passes the same suite.
let partitioned: TestDatabase;
beforeAll(async () => {
  partitioned = await openTestDatabase('conformance_partitioned', 10, 'daily-partitions');
});
afterAll(async () => {
  await partitioned?.close();
});
describeInboxStoreConformance<TestTx>("Postgres, layout: 'daily-partitions'", async () => {
  const { db, schema } = partitioned;
  return {
    store: new PostgresInboxStore({ db, schema, layout: 'daily-partitions' }),
    sameInbox: () => new PostgresInboxStore({ db, schema, layout: 'daily-partitions' }),
    // The plain layout's table of the other suite: another inbox in the same database.
    otherInbox: () => new PostgresInboxStore({ db: postgres.db, schema: postgres.schema }),
    applyEffect: (tx, consumer, messageId) => insertEffect(tx, schema, consumer, messageId),
    countEffects: (consumer, messageId) => countEffects(db, schema, consumer, messageId),
    statementEffect: (consumer, messageId) => db.withSchema(schema).insertInto('effects').values({ consumer, message_id: messageId }),
    failStatementQuietly,
    sendStatement,
  };
});

describeInboxStoreConformance<pg.PoolClient>('Postgres, a callback-style seam (node-postgres client as the transaction)', async () => {
  const { db, schema, pool } = postgres;
  return {
    store: new PostgresInboxStore({ seam: callbackSeam(pgCallbackLibrary(pool)), schema }),
    // The inbox is the table, not the library that reaches it: a Kysely store on the same table is the same inbox.
    sameInbox: () => new PostgresInboxStore({ db, schema }),
    applyEffect: async (client, consumer, messageId) => {
      await client.query(`INSERT INTO "${schema}".effects (consumer, message_id) VALUES ($1, $2)`, [consumer, messageId]);
    },
    countEffects: (consumer, messageId) => countEffects(db, schema, consumer, messageId),
    failStatementQuietly: async (client) => {
      await client.query('SELECT 1 / 0').catch(() => undefined);
    },
  };
});
