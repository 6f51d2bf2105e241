// Real conflicts between handlers' transactions on Postgres: a serialization failure (SERIALIZABLE transactions,
// a write skew between two handlers) and a deadlock (two handlers locking two rows in opposite orders). Each
// costs the losing delivery a retry, never an ack of an effect that did not commit; its redelivery applies once.

import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import type { Outcome } from '../src/outcome.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from './support/postgres.js';

const message = (id: string): InboundMessage => ({ id, body: JSON.stringify({ id }), headers: {}, source: { transport: 'memory' } });

/** Resolves once `n` parties arrived. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return async () => {
    if (++arrived === n) open();
    await opened;
  };
}

describe('conflicts between handler transactions', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('conflicts');
    await t.pool.query(`CREATE TABLE "${t.schema}".slots (k text PRIMARY KEY, n int NOT NULL)`);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function slots(prefix: string): Promise<Record<string, number>> {
    const { rows } = await t.pool.query<{ k: string; n: number }>(`SELECT k, n FROM "${t.schema}".slots WHERE k LIKE $1 ORDER BY k`, [`${prefix}%`]);
    return Object.fromEntries(rows.map((r) => [r.k, r.n]));
  }

  it('retries the loser of a real serialization failure (SERIALIZABLE transactions, a write skew), then applies it once', async () => {
    // Every transaction of this pool is SERIALIZABLE, the handler's (and its claim's) included.
    const pool = new pg.Pool({ connectionString: t.url, max: 4, options: '-c default_transaction_isolation=serializable' });
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      await t.pool.query(`INSERT INTO "${t.schema}".slots VALUES ('skew-x', 0), ('skew-y', 0)`);
      const bothRead = barrier(2);
      let first = true;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'skew',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
        handler: async (m, { tx }) => {
          // Each reads both slots, then writes its own: each decided on what the other changes.
          const { rows } = await sql<{ total: number }>`SELECT sum(n)::int AS total FROM ${sql.table(`${t.schema}.slots`)} WHERE k LIKE 'skew-%'`.execute(tx);
          if (first) await bothRead();
          await sql`UPDATE ${sql.table(`${t.schema}.slots`)} SET n = n + 1 + ${rows[0]!.total} WHERE k = ${`skew-${m.id}`}`.execute(tx);
          await insertEffect(tx, t.schema, 'skew', m.id);
        },
      });
      const outcomes = await Promise.all([consumer.handle(message('x')), consumer.handle(message('y'))]);
      first = false;
      expect(outcomes.map((o) => o.status).sort()).toEqual(['processed', 'retry']);
      const loser = outcomes.find((o) => o.status === 'retry') as Extract<Outcome, { status: 'retry' }>;
      expect(loser.error).toMatchObject({ code: '40001' });
      // Not acked: its effect did not commit.
      expect(await countEffects(t.db, t.schema, 'skew', loser.messageId)).toBe(0);
      expect(await consumer.handle(message(loser.messageId))).toMatchObject({ status: 'processed' });
      expect(await countEffects(t.db, t.schema, 'skew')).toBe(2);
      for (const id of ['x', 'y']) expect(await countEffects(t.db, t.schema, 'skew', id)).toBe(1);
      // Serial order: the winner saw 0, the loser's redelivery saw the winner's 1.
      expect(Object.values(await slots('skew-')).sort()).toEqual([1, 2]);
    } finally {
      await db.destroy();
    }
  });

  it('retries the loser of a real deadlock between two handlers, then applies it once', async () => {
    await t.pool.query(`INSERT INTO "${t.schema}".slots VALUES ('lock-a', 0), ('lock-b', 0)`);
    const bothLocked = barrier(2);
    let first = true;
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'deadlock',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
      handler: async (m, { tx }) => {
        const [one, two] = m.id === 'ab' ? ['lock-a', 'lock-b'] : ['lock-b', 'lock-a'];
        await sql`UPDATE ${sql.table(`${t.schema}.slots`)} SET n = n + 1 WHERE k = ${one}`.execute(tx);
        if (first) await bothLocked();
        await sql`UPDATE ${sql.table(`${t.schema}.slots`)} SET n = n + 1 WHERE k = ${two}`.execute(tx);
        await insertEffect(tx, t.schema, 'deadlock', m.id);
      },
    });
    const outcomes = await Promise.all([consumer.handle(message('ab')), consumer.handle(message('ba'))]);
    first = false;
    expect(outcomes.map((o) => o.status).sort()).toEqual(['processed', 'retry']);
    const loser = outcomes.find((o) => o.status === 'retry') as Extract<Outcome, { status: 'retry' }>;
    expect(loser).toMatchObject({ reason: 'handler-error', attempt: 1, error: { code: '40P01' } });
    expect(await countEffects(t.db, t.schema, 'deadlock', loser.messageId)).toBe(0);
    const [row] = await consumer.config.store.findRows('deadlock', [loser.messageId]);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, lastError: { code: '40P01' } });
    expect(await consumer.handle(message(loser.messageId))).toMatchObject({ status: 'processed', attempt: 2 });
    for (const id of ['ab', 'ba']) expect(await countEffects(t.db, t.schema, 'deadlock', id)).toBe(1);
    expect(await slots('lock-')).toEqual({ 'lock-a': 2, 'lock-b': 2 });
  });

  it('fails the attempt whose COMMIT Postgres refuses (a deferred constraint): retried, then dead-lettered, never taken for the store being down', async () => {
    // A deferred foreign-key check is the usual constraint refused only at COMMIT (23503, retriable by default:
    // the referenced row may yet arrive).
    const table = `"${t.schema}".checked`;
    await t.pool.query(`CREATE TABLE ${table} (id text NOT NULL)`);
    await t.pool.query(`CREATE FUNCTION "${t.schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.id LIKE 'bad%' THEN RAISE EXCEPTION 'refused at commit' USING ERRCODE = '23503'; END IF; RETURN NULL; END $$`);
    await t.pool.query(`CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON ${table} DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW EXECUTE FUNCTION "${t.schema}".refuse()`);
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'deferred',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      maxAttempts: 2,
      backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
      handler: async (m, { tx }) => {
        await sql`INSERT INTO ${sql.table(`${t.schema}.checked`)} (id) VALUES (${m.id})`.execute(tx);
        await insertEffect(tx, t.schema, 'deferred', m.id);
      },
    });
    expect(await consumer.handle(message('good'))).toMatchObject({ status: 'processed' });
    expect(await consumer.handle(message('bad-1'))).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1, error: { code: '23503' } });
    expect(await consumer.handle(message('bad-1'))).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 2 });
    expect(await countEffects(t.db, t.schema, 'deferred', 'bad-1')).toBe(0);
    const [row] = await consumer.config.store.findRows('deferred', ['bad-1']);
    expect(row).toMatchObject({ status: 'dead_lettered', attempts: 2, lastError: { message: 'refused at commit' } });
  });
});
