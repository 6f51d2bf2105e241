// Issue 22, item 7: the late-message rule and expiry must use one clock. Expiry, leases and pruning run on the
// store's clock (Postgres now()); the rule asks the store for it, so an application clock that is behind or
// ahead of the database's does not move the rule's threshold. The in-memory store's clock is set apart from the
// application's here; the Postgres store's is its server's.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { openTestDatabase, type TestDatabase } from './support/postgres.js';

const HOUR = 3_600_000;
const WINDOW = 24 * HOUR;

const message = (id: string, timestamp: Date): InboundMessage => ({
  id,
  body: '{}',
  headers: {},
  timestamp,
  source: { transport: 'memory' },
});

/** A consumer over an in-memory store whose clock is `skewMs` ahead of the application's. */
function skewed(skewMs: number) {
  const store = new InMemoryInboxStore({ clock: () => Date.now() + skewMs });
  let runs = 0;
  const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
    name: `skew-${skewMs}`,
    store,
    dedupeWindowMs: WINDOW,
    handler: async () => {
      runs++;
    },
  });
  return { consumer, store, runs: () => runs };
}

describe('the late-message rule runs on the store clock', () => {
  it.each([
    ['2 h ahead of', 2 * HOUR],
    ['30 min ahead of', 30 * 60_000],
  ])(
    'a store clock %s the application: a message late on it is dead-lettered, though young on the application clock',
    async (_, skew) => {
      const { consumer, runs } = skewed(skew);
      // On the application's clock the message is younger than the window; on the store's it is older.
      const timestamp = new Date(Date.now() - WINDOW + skew / 2);
      expect(await consumer.handle(message('m1', timestamp))).toMatchObject({
        status: 'dead-letter',
        reason: 'beyond-dedupe-window',
      });
      expect(await consumer.handleBatch([message('m2', timestamp), message('m3', new Date())])).toMatchObject(
        [{ status: 'dead-letter', reason: 'beyond-dedupe-window' }, { status: 'processed' }],
      );
      expect(runs()).toBe(1);
    },
  );

  it('a store clock 2 h behind the application: a message young on it is processed, though late on the application clock', async () => {
    const { consumer, runs } = skewed(-2 * HOUR);
    const timestamp = new Date(Date.now() - WINDOW - HOUR);
    expect((await consumer.handle(message('m1', timestamp))).status).toBe('processed');
    expect(
      (await consumer.handleBatch([message('m2', timestamp), message('m3', timestamp)])).map((o) => o.status),
    ).toEqual(['processed', 'processed']);
    expect(runs()).toBe(3);
  });

  it('agrees with the store on the edge: the expiry the store wrote is what the rule compares with', async () => {
    const skew = 3 * HOUR;
    const { consumer, store } = skewed(skew);
    const sent = new Date(Date.now() + skew - 10_000); // 10 s old on the store's clock
    expect((await consumer.handle(message('m1', sent))).status).toBe('processed');
    const [row] = await store.findRows(`skew-${skew}`, ['m1']);
    // Expiry is completion + window on the store's clock: a redelivery is judged by the same clock.
    expect(row!.expiresAt.getTime()).toBeGreaterThan(sent.getTime() + WINDOW);
    expect((await consumer.handle(message('m1', sent))).status).toBe('duplicate');
  });

  it('falls back to the application clock for a store without now()', async () => {
    const store = new InMemoryInboxStore({ clock: () => Date.now() + 2 * HOUR });
    // A store written before now() existed: the method is absent.
    Object.defineProperty(store, 'now', { value: undefined });
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'no-now',
      store,
      dedupeWindowMs: WINDOW,
      handler: async () => {},
    });
    expect((await consumer.handle(message('m1', new Date(Date.now() - WINDOW - HOUR)))).status).toBe(
      'dead-letter',
    );
    expect((await consumer.handle(message('m2', new Date(Date.now() - WINDOW + HOUR)))).status).toBe(
      'processed',
    );
  });
});

describe('the Postgres store clock', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('store_clock');
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is the database server's, as expiry is", async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const before = Date.now();
    const now = await store.now();
    const after = Date.now();
    // Same machine here: the server's clock reads within the round trip (and a second of slack).
    expect(now.getTime()).toBeGreaterThanOrEqual(before - 1_000);
    expect(now.getTime()).toBeLessThanOrEqual(after + 1_000);
    const { rows } = await t.pool.query<{ ms: number }>(
      'SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms',
    );
    expect(Math.abs(Number(rows[0]!.ms) - now.getTime())).toBeLessThan(5_000);
  });

  it('decides the late rule with it: a message just older than the window is dead-lettered, one just younger processed', async () => {
    const consumer = idempotentConsumer({
      name: 'pg-late',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      dedupeWindowMs: WINDOW,
      handler: async () => {},
    });
    expect(await consumer.handle(message('old', new Date(Date.now() - WINDOW - 60_000)))).toMatchObject({
      status: 'dead-letter',
      reason: 'beyond-dedupe-window',
    });
    expect((await consumer.handle(message('young', new Date(Date.now() - WINDOW + 60_000)))).status).toBe(
      'processed',
    );
  });
});
