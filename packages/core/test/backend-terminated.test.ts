// A Postgres backend terminated while the store holds its connection (pg_terminate_backend, a restart, 57P01)
// must not crash the process: node-postgres emits 'error' on a checked-out client that has no listener of its
// own (pg-pool removes its idle listener on checkout), and Node exits on an unhandled 'error' event. The store
// guards the connection it holds; the delivery comes back as `retry` and its redelivery is applied once. vitest
// reports an unhandled error as a failed run, so each case here would fail without it. When the handler had run
// and the store is reachable again at once (only that backend died), the attempt is counted (`handler-error`):
// a handler that loses its connection on every attempt still reaches the DLQ (unrecordable-failure.test.ts).

import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from './support/postgres.js';

const message = (id: string): InboundMessage => ({ id, body: JSON.stringify({ id }), headers: {}, source: { transport: 'memory' } });

/** Resolves once `pid` no longer shows in pg_stat_activity (its client has had the FATAL and the end of stream). */
async function terminate(admin: pg.Pool, pid: number): Promise<void> {
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  for (;;) {
    const { rows } = await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]);
    if (rows.length === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  // Let the socket's FATAL message and end reach the client before the handler goes on.
  await new Promise((r) => setTimeout(r, 100));
}

describe('a backend terminated while the store holds its connection', () => {
  let t: TestDatabase;
  let admin: pg.Pool;
  beforeAll(async () => {
    t = await openTestDatabase('terminated');
    admin = new pg.Pool({ connectionString: t.url, max: 2 });
    admin.on('error', () => {});
  });
  afterAll(async () => {
    await admin?.end();
    await t?.close();
  });

  /** A pool with no error listener of any kind, like an application that forgot it: only the store guards. */
  function bareDb(): Kysely<TestDB> {
    return new Kysely<TestDB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: t.url, max: 2 }) }) });
  }

  it.each([
    ['sleeps through it, then returns', false],
    ['sleeps through it, then writes again', true],
  ] as const)('handle(): a handler that %s gets retry, its attempt counted; the redelivery applies once', async (_, writeAfter) => {
    const name = `terminated-${writeAfter ? 'write' : 'idle'}`;
    const db = bareDb();
    let terminated = false;
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db, schema: t.schema }),
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, name, m.id);
          if (terminated) return;
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
          await terminate(admin, rows[0]!.pid);
          terminated = true;
          if (writeAfter) await insertEffect(tx, t.schema, name, `${m.id}-after`);
        },
      });
      const first = await consumer.handle(message('m1'));
      expect(terminated).toBe(true);
      expect(first).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1 });
      expect(await countEffects(t.db, t.schema, name)).toBe(0);
      expect(await consumer.handle(message('m1'))).toMatchObject({ status: 'processed', attempt: 2 });
      expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
      expect(await countEffects(t.db, t.schema, name, 'm1')).toBe(1);
      expect(await countEffects(t.db, t.schema, name)).toBe(1);
    } finally {
      await db.destroy();
    }
  });

  it("handle(): a backend terminated during the handler's own statement is retry with the attempt counted, whatever isRetriable says", async () => {
    const name = 'terminated-mid-statement';
    const db = bareDb();
    let terminated = false;
    let killer: Promise<void> = Promise.resolve();
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db, schema: t.schema }),
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        // Classifies the handler's own errors only: a lost connection is never dead-lettered by it.
        isRetriable: () => false,
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, name, m.id);
          if (terminated) return;
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
          const pid = rows[0]!.pid;
          killer = (async () => {
            // Once the statement below is running on that backend, terminate it.
            for (;;) {
              const busy = await admin.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep(30)%' AND state = 'active'`, [pid]);
              if (busy.rows.length > 0) break;
              await new Promise((r) => setTimeout(r, 20));
            }
            await terminate(admin, pid);
            terminated = true;
          })();
          // Fails as soon as the backend's FATAL arrives, often before the end of the socket does.
          await sql`SELECT pg_sleep(30)`.execute(tx);
        },
      });
      const first = await consumer.handle(message('m1'));
      await killer;
      expect(terminated).toBe(true);
      expect(first).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1 });
      expect((await consumer.handle(message('m1')))).toMatchObject({ status: 'processed', attempt: 2 });
      expect(await countEffects(t.db, t.schema, name)).toBe(1);
    } finally {
      await db.destroy();
    }
  });

  it('handleBatch(): the batch is handled again one message per transaction; only the one that lost its connection is charged', async () => {
    const name = 'terminated-batch';
    const db = bareDb();
    let terminated = false;
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db, schema: t.schema }),
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, name, m.id);
          if (terminated || m.id !== 'b') return;
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
          await terminate(admin, rows[0]!.pid);
          terminated = true;
        },
      });
      const batch = [message('a'), message('b'), message('c')];
      const first = await consumer.handleBatch(batch);
      expect(terminated).toBe(true);
      // The batch's transaction died with 'b'; handled again one by one, 'b' no longer kills its backend.
      expect(first).toMatchObject([
        { status: 'processed', attempt: 1 },
        { status: 'processed', attempt: 1 },
        { status: 'processed', attempt: 1 },
      ]);
      expect((await consumer.handleBatch(batch)).map((o) => o.status)).toEqual(['duplicate', 'duplicate', 'duplicate']);
      expect(await countEffects(t.db, t.schema, name)).toBe(3);
    } finally {
      await db.destroy();
    }
  });

  it('leased mode: a handler whose transaction loses its backend gets retry (store-unavailable); the redelivery applies once', async () => {
    const name = 'terminated-leased';
    const db = bareDb();
    let terminated = false;
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        mode: 'leased',
        leaseMs: 1_500,
        handlerTimeoutMs: 1_000,
        store: new PostgresInboxStore({ db, schema: t.schema }),
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, name, m.id);
          if (terminated) return;
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
          await terminate(admin, rows[0]!.pid);
          terminated = true;
        },
      });
      const first = await consumer.handle(message('m1'));
      expect(terminated).toBe(true);
      expect(first).toMatchObject({ status: 'retry', reason: 'store-unavailable' });
      expect(await countEffects(t.db, t.schema, name)).toBe(0);
      // The lease taken before the handler ran is still live: redeliveries wait for it, then take over.
      let again = await consumer.handle(message('m1'));
      while (again.status === 'retry') {
        await new Promise((r) => setTimeout(r, 100));
        again = await consumer.handle(message('m1'));
      }
      expect(again.status).toBe('processed');
      expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
      expect(await countEffects(t.db, t.schema, name)).toBe(1);
    } finally {
      await db.destroy();
    }
  });
});
