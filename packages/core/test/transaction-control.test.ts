// A handler that ends its own transaction: how a statement is told to be transaction control, and the Kysely
// seam's second line — a COMMIT or ROLLBACK that reached Postgres past the refusal is found from the connection's
// transaction status, so the attempt is never reported processed.

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/index.js';
import { PostgresInboxStore, transactionControlIn } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

describe('transactionControlIn', () => {
  it.each([
    ['COMMIT', 'COMMIT'],
    ['  commit work', 'commit work'],
    ['END', 'END'],
    ['abort', 'abort'],
    ['ROLLBACK', 'ROLLBACK'],
    ['rollback and chain', 'rollback and chain'],
    ['BEGIN', 'BEGIN'],
    ['start transaction isolation level serializable', 'start transaction isolation level serializable'],
    ["PREPARE TRANSACTION 'x'", "PREPARE TRANSACTION 'x'"],
    ['SELECT 1; ROLLBACK', 'ROLLBACK'],
    ['INSERT INTO t VALUES (1); COMMIT', 'COMMIT'],
    ["UPDATE t SET a = 'x;y'; end;", 'end'],
    ['COMMIT;', 'COMMIT'],
    ['SELECT 1;\n-- why\n  rollback', 'rollback'],
    ['SELECT 1; /* a /* nested */ comment */ COMMIT', 'COMMIT'],
    ['/* leading */ COMMIT', 'COMMIT'],
    ['-- a comment\nCOMMIT', 'COMMIT'],
    ['ROLLBACK TO SAVEPOINT inboxkit_message', 'ROLLBACK TO SAVEPOINT inboxkit_message'],
    ['release inboxkit_message', 'release inboxkit_message'],
    ['SAVEPOINT inboxkit_message', 'SAVEPOINT inboxkit_message'],
  ])('finds %j', (text, found) => {
    expect(transactionControlIn(text)).toBe(found);
  });

  it.each([
    'INSERT INTO t (a) VALUES ($1)',
    "SELECT 'COMMIT; ROLLBACK' AS t",
    "SELECT E'it\\'s; commit'",
    'SELECT "commit"; SELECT 1',
    'SELECT CASE WHEN a THEN 1 END FROM t',
    'DO $$ BEGIN PERFORM 1; END $$',
    'DO $body$ BEGIN COMMIT; END $body$',
    'SELECT 1 -- ; commit',
    "INSERT INTO t VALUES ('a'); SELECT 'b; commit'",
    'SELECT 1 /* ; rollback /* nested */ ; end */',
    'SAVEPOINT mine',
    'ROLLBACK TO SAVEPOINT mine',
    'RELEASE SAVEPOINT mine',
    // The patterns' savepoints inside the handler's transaction (advisoryLock, the reconciliation sweeper).
    'SAVEPOINT inboxkit_advisory_lock',
    'ROLLBACK TO SAVEPOINT inboxkit_advisory_lock',
    'RELEASE SAVEPOINT inboxkit_reconciliation_repair',
    'UPDATE t SET started = true, ended = now()',
  ])('leaves %j alone', (text) => {
    expect(transactionControlIn(text)).toBeUndefined();
  });
});

describe('the Kysely seam, past the refusal', () => {
  let t: TestDatabase;
  let held: pg.PoolClient | undefined;
  beforeAll(async () => {
    t = await openTestDatabase('tx_control');
    // The client the store holds for the handler's transaction: the last one the pool handed out.
    t.pool.on('acquire', (client) => (held = client));
  });
  afterAll(async () => {
    await t?.close();
  });

  for (const control of ['COMMIT', 'ROLLBACK']) {
    for (const pipelining of ['auto', 'off'] as const) {
      it(`finds a ${control} sent on the connection under Kysely (pipelining ${pipelining}): dead-lettered, never processed, applied once`, async () => {
        const consumer = `slipped-${control}-${pipelining}`;
        const c = idempotentConsumer<unknown, TestTx>({
          name: consumer,
          store: new PostgresInboxStore({ db: t.db, schema: t.schema, pipelining }),
          handler: async (m, { tx }) => {
            // Past the seam: node-postgres' own query on the client Kysely holds.
            await (Reflect.get(pg.Client.prototype, 'query') as (this: pg.Client, text: string) => Promise<unknown>).call(held!, control);
            await insertEffect(tx, t.schema, consumer, m.id);
          },
        });
        const message = { id: 'm1', body: '{}', headers: {}, source: { transport: 'memory' } };
        const first = await c.handle(message);
        expect(first).toMatchObject({ status: 'dead-letter', reason: 'transaction-control', attempts: 1 });
        expect((first as { error?: { message: string } }).error?.message).toMatch(/may have committed/);
        expect((await c.handle(message)).status).not.toBe('processed');
        expect(await countEffects(t.db, t.schema, consumer, 'm1')).toBe(1);
      });
    }
  }

  it("dead-letters every message of a batch whose transaction a handler ended past the refusal; none applies twice", async () => {
    const consumer = 'slipped-batch';
    const c = idempotentConsumer<unknown, TestTx>({
      name: consumer,
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      handler: async (m, { tx }) => {
        if (m.id === 'b-bad') await (Reflect.get(pg.Client.prototype, 'query') as (this: pg.Client, text: string) => Promise<unknown>).call(held!, 'ROLLBACK');
        await insertEffect(tx, t.schema, consumer, m.id);
      },
    });
    const batch = ['b-1', 'b-bad', 'b-2'].map((id) => ({ id, body: '{}', headers: {}, source: { transport: 'memory' } }));
    const outcomes = await c.handleBatch(batch);
    expect(outcomes.map((o) => [o.status, (o as { reason?: string }).reason])).toEqual([
      ['dead-letter', 'transaction-control'],
      ['dead-letter', 'transaction-control'],
      ['dead-letter', 'transaction-control'],
    ]);
    const again = await c.handleBatch(batch);
    expect(again.map((o) => o.status)).toEqual(['dead-letter', 'dead-letter', 'dead-letter']);
    for (const id of ['b-1', 'b-bad', 'b-2']) expect(await countEffects(t.db, t.schema, consumer, id)).toBeLessThanOrEqual(1);
  });
});
