// The inbox over node-postgres: the store conformance suite with a handler that writes through the PoolClient it
// is given, pipelined and not; and the pool check at start-up.

import { ConfigurationError } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeInboxStoreConformance } from '../../testing/src/store-conformance.js';
import { pgInboxStore, pgSeam } from '../src/pg/index.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('pg');
});
afterAll(async () => {
  await t?.close();
});

// (The default, pipelining 'auto', runs in conformance.test.ts with the other adapters.)
describeInboxStoreConformance<pg.PoolClient>("node-postgres, pipelining: 'off'", async () => ({
  store: pgInboxStore({ pool: t.pool, schema: t.schema, pipelining: 'off' }),
  applyEffect: async (client, consumer, messageId) => {
    await client.query(`INSERT INTO "${t.schema}".effects (consumer, message_id) VALUES ($1, $2)`, [
      consumer,
      messageId,
    ]);
  },
  countEffects: (consumer, messageId) => countEffects(t.pool, t.schema, consumer, messageId),
  sendStatement: (client, sql) => client.query(sql),
}));

describe('pgSeam', () => {
  it('refuses a single pg.Client, saying to pass a pool', () => {
    const client = new pg.Client({ connectionString: t.url });
    expect(() => pgSeam(client as unknown as pg.Pool)).toThrow(ConfigurationError);
    expect(() => pgSeam(client as unknown as pg.Pool)).toThrow(/Pass a pg\.Pool/);
  });

  it('refuses a checked-out PoolClient', async () => {
    const client = await t.pool.connect();
    try {
      expect(() => new PostgresInboxStore({ seam: pgSeam(client as unknown as pg.Pool) })).toThrow(
        /single pg\.Client \(or a checked-out PoolClient\)/,
      );
    } finally {
      client.release();
    }
  });
});
