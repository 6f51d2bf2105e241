// A duplicate's transaction wrote nothing, and its ROLLBACK is sent without a wait for its answer: node-postgres
// sends a client's queries in order, so whoever takes the connection next has its first statement run after the
// ROLLBACK. What must hold: the connection is never handed to anyone inside that transaction, it goes back to the
// pool at once, and a claim that takes it next starts from a clean transaction (its effect commits, nothing of
// the duplicate's transaction leaks into it). A one-connection pool makes every case share the connection.

import { AsyncLocalStorage } from 'node:async_hooks';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from './support/postgres.js';

const message = (id: string): InboundMessage => ({ id, body: JSON.stringify({ id }), headers: {}, source: { transport: 'memory' } });
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** This file's pool's application_name: other test files run beside it, with transactions of their own. */
const APP = 'inboxkit-deferred-rollback-test';

describe("a duplicate's ROLLBACK", () => {
  let t: TestDatabase;
  let pool: pg.Pool;
  let db: Kysely<TestDB>;
  beforeAll(async () => {
    t = await openTestDatabase('deferred_rollback');
    pool = new pg.Pool({ connectionString: t.url, max: 1, application_name: APP });
    db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
  });
  afterAll(async () => {
    await db?.destroy();
    await t?.close();
  });

  function consumer(name: string) {
    return idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db, schema: t.schema }),
      handler: async (m, { tx }) => insertEffect(tx, t.schema, name, m.id),
    });
  }

  /**
   * Backends of this file's pool left idle inside a transaction, seen from another connection (the test
   * database's own pool) while this pool's connection sits idle.
   */
  async function idleInTransaction(): Promise<number> {
    const { rows } = await t.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'`,
      [APP],
    );
    return rows[0]!.n;
  }

  /** True when the statement runs in a transaction of its own (no transaction was left open on the connection). */
  async function freshTransaction(): Promise<boolean> {
    const { rows } = await pool.query<{ fresh: boolean }>('SELECT now() = statement_timestamp() AS fresh');
    return rows[0]!.fresh;
  }

  it('goes out at once: the pool has the connection back when handle() resolves, outside any transaction', async () => {
    const c = consumer('alone');
    expect((await c.handle(message('a'))).status).toBe('processed');
    expect((await c.handle(message('a'))).status).toBe('duplicate');
    expect(pool.idleCount).toBe(1);
    expect(await freshTransaction()).toBe(true);
    // The backend is idle, not idle in a transaction.
    expect(await idleInTransaction()).toBe(0);
  });

  it('an application query waiting for the pool meanwhile gets the connection outside any transaction', async () => {
    const c = consumer('waiting-app');
    expect((await c.handle(message('w'))).status).toBe('processed');
    expect((await c.handle(message('w'))).status).toBe('duplicate');
    // Straight after the duplicate, on the one-connection pool.
    expect(await freshTransaction()).toBe(true);
  });

  it('first deliveries and duplicates in turn each apply once, on one connection', async () => {
    const name = 'interleaved';
    const c = consumer(name);
    const outcomes: string[] = [];
    for (let i = 0; i < 30; i++) {
      // Each duplicate is followed at once (same turn) by a new delivery, whose claim goes after its ROLLBACK.
      outcomes.push((await c.handle(message(`i-${i}`))).status);
      outcomes.push((await c.handle(message(`i-${i}`))).status);
    }
    expect(outcomes.filter((o) => o === 'processed')).toHaveLength(30);
    expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(30);
    expect(await countEffects(db, t.schema, name)).toBe(30);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${t.schema}.inbox WHERE consumer = $1 AND status = 'completed'`,
      [name],
    );
    expect(rows[0]!.n).toBe(30);
    expect(await freshTransaction()).toBe(true);
  });

  it("the next claim on the connection runs in a transaction of its own, not in the duplicate's", async () => {
    const name = 'own-transaction';
    const ages: number[] = [];
    const c = idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db, schema: t.schema }),
      handler: async (m, { tx }) => {
        // How long ago this transaction began: the duplicate's began before the busy wait below.
        const { rows } = await sql<{ ms: number }>`SELECT (extract(epoch FROM statement_timestamp() - now()) * 1000)::float8 AS ms`.execute(tx);
        ages.push(rows[0]!.ms);
        await insertEffect(tx, t.schema, name, m.id);
      },
    });
    expect((await c.handle(message('x'))).status).toBe('processed');
    expect((await c.handle(message('x'))).status).toBe('duplicate');
    const until = Date.now() + 300; // (long beside a round trip on a loaded machine)
    while (Date.now() < until); // same turn of the event loop: the ROLLBACK's answer has not been read
    expect((await c.handle(message('y'))).status).toBe('processed');
    expect(ages).toHaveLength(2);
    expect(ages[1]!).toBeLessThan(200);
    expect(await countEffects(db, t.schema, name)).toBe(2);
  });

  it("the handler of the next claim on the connection runs in its own caller's async context", async () => {
    const name = 'async-context';
    const als = new AsyncLocalStorage<string>();
    const seen: [string, string | undefined][] = [];
    const c = idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db, schema: t.schema }),
      handler: async (m, { tx }) => {
        await insertEffect(tx, t.schema, name, m.id);
        seen.push([m.id, als.getStore()]); // after an await: the context must still be this delivery's
      },
    });
    for (let i = 0; i < 5; i++) {
      await als.run(`caller-a${i}`, () => c.handle(message(`a${i}`)));
      await als.run(`caller-a${i}-again`, () => c.handle(message(`a${i}`))); // duplicate: parks the connection
    }
    expect(seen).toEqual(Array.from({ length: 5 }, (_, i) => [`a${i}`, `caller-a${i}`]));
  });

  it('concurrent deliveries over a one-connection pool: each id applied once, none stuck', async () => {
    const name = 'concurrent';
    const c = consumer(name);
    const ids = Array.from({ length: 40 }, (_, i) => `c-${i % 20}`);
    const outcomes = await Promise.all(ids.map((id) => c.handle(message(id))));
    const statuses = outcomes.map((o) => o.status);
    expect(statuses.filter((s) => s === 'processed')).toHaveLength(20);
    expect(statuses.every((s) => s === 'processed' || s === 'duplicate' || s === 'retry')).toBe(true);
    expect(await countEffects(db, t.schema, name)).toBe(20);
    await nextTurn();
    await nextTurn();
    expect(pool.idleCount).toBe(1);
  });

  it('a claim after a duplicate that fails leaves nothing open', async () => {
    const name = 'takeover-fails';
    let fail = true;
    const c = idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db, schema: t.schema }),
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, { tx }) => {
        await insertEffect(tx, t.schema, name, m.id);
        if (fail && m.id === 'second') throw new Error('boom');
      },
    });
    expect((await c.handle(message('first'))).status).toBe('processed');
    expect((await c.handle(message('first'))).status).toBe('duplicate');
    expect((await c.handle(message('second'))).status).toBe('retry');
    fail = false;
    expect((await c.handle(message('second'))).status).toBe('processed');
    expect(await countEffects(db, t.schema, name)).toBe(2);
    await nextTurn();
    await nextTurn();
    expect(await freshTransaction()).toBe(true);
    expect(await idleInTransaction()).toBe(0);
  });
});
