// InboxStore#identity(), which the fast path folds into its keys: the same for every store on one table, and
// different for another schema, another database (PGlite: each its own cluster) or another in-memory store.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemoryInboxStore } from '../src/memory/index.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { openPglite } from './support/pglite.js';
import { openTestDatabase, type TestDatabase } from './support/postgres.js';

describe('InboxStore#identity()', () => {
  let a: TestDatabase;
  let b: TestDatabase;
  beforeAll(async () => {
    a = await openTestDatabase('identity_a', 2);
    b = await openTestDatabase('identity_b', 2);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('names the cluster, the database and the schema-qualified table on Postgres: equal per table, not across schemas', async () => {
    const one = await new PostgresInboxStore({ db: a.db, schema: a.schema }).identity();
    const again = await new PostgresInboxStore({ db: a.db, schema: a.schema }).identity();
    const other = await new PostgresInboxStore({ db: b.db, schema: b.schema }).identity();
    expect(one).toMatch(new RegExp(`^postgres:\\d+:[^:]+:"${a.schema}"\\."inbox"$`));
    expect(again).toBe(one);
    expect(other).not.toBe(one);
  });

  it('tells two PGlite databases apart, though their database, schema and table names are the same', async () => {
    const [x, y] = await Promise.all([openPglite(), openPglite()]);
    try {
      const ix = await new PostgresInboxStore({ db: x.db }).identity();
      const iy = await new PostgresInboxStore({ db: y.db }).identity();
      expect(ix).toMatch(/^postgres:\d+:postgres:"inboxkit"\."inbox"$/);
      expect(iy).not.toBe(ix);
    } finally {
      await x.close();
      await y.close();
    }
  });

  it('is random per in-memory store, and stable for one', async () => {
    const store = new InMemoryInboxStore();
    expect(await store.identity()).toBe(await store.identity());
    expect(await new InMemoryInboxStore().identity()).not.toBe(await store.identity());
  });
});
