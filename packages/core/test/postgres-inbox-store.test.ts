// What only the Postgres store does: round trips per delivery, prepared claims that survive DISCARD ALL, the
// application's plugins applied to the handler's transaction and not to the store's own statements, handlers
// that misuse their transaction, the prune lock, and connections always returned outside a transaction.

import { randomBytes } from 'node:crypto';
import { CamelCasePlugin, Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetryableError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { startPruner } from '../src/prune-inbox.js';
import { countEffects, insertEffect, openTestDatabase, recordingPool, type TestDatabase, type TestDB, type TestTx } from './support/postgres.js';

const message = (id: string, payload: unknown = { id }): InboundMessage => ({
  id,
  body: JSON.stringify(payload),
  headers: {},
  source: { transport: 'memory' },
});


describe('PostgresInboxStore', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('pg_store');
  });
  afterAll(async () => {
    await t?.close();
  });

  it("sends BEGIN and the claim of a new id (with its lock timeout) in one round trip; a duplicate's ROLLBACK rides with the next claim, or goes alone on the next turn", async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-rt');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'round-trips',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        handler: async (m, { tx }) => insertEffect(tx, t.schema, 'round-trips', m.id),
      });
      await consumer.handle(message('warm-up')); // probe and PREPARE happen once
      sent.length = 0;
      expect((await consumer.handle(message('m1'))).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect(sent[0]).toMatch(
        /^BEGIN;\nEXECUTE inboxkit_new_[0-9a-f]+ \('round-trips'::text, 'm1'::text.*, '5000'\)$/s,
      );
      expect(sent[1]).toMatch(/insert into/i);
      expect(sent[2]).toBe('COMMIT');
      sent.length = 0;
      expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
      expect(sent).toHaveLength(1); // the claim's round trip only
      // The next claim in the same turn takes the parked connection: the ROLLBACK goes in front of its BEGIN.
      expect((await consumer.handle(message('m2'))).status).toBe('processed');
      expect(sent).toHaveLength(4);
      expect(sent[1]).toMatch(/^ROLLBACK;\nBEGIN;\nEXECUTE inboxkit_new_[0-9a-f]+ \('round-trips'::text, 'm2'::text/s);
      sent.length = 0;
      // With no claim after it, the ROLLBACK goes out alone on the next turn of the event loop.
      expect((await consumer.handle(message('m2'))).status).toBe('duplicate');
      expect(sent).toHaveLength(1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(sent).toEqual([expect.stringMatching(/^BEGIN;\nEXECUTE /), 'ROLLBACK']);
      expect(await countEffects(t.db, t.schema, 'round-trips')).toBe(3);
    } finally {
      await db.destroy();
    }
  });

  it('claims an id whose attempt was recorded as started with the prepared take-over claim, in the same round trip as BEGIN', async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-takeover');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const attempts: number[] = [];
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'take-over',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        handler: async (m, { tx, attempt }) => {
          attempts.push(attempt);
          await insertEffect(tx, t.schema, 'take-over', m.id);
        },
      });
      await consumer.handle(message('warm-up'));
      await consumer.recordAttemptsStarted([message('s1'), message('s2')]);
      sent.length = 0;
      expect((await consumer.handle(message('s1'))).status).toBe('processed');
      expect(sent).toHaveLength(4); // PREPARE of the take-over on this connection, then the three round trips
      expect(sent[0]).toMatch(/^PREPARE inboxkit_takeover_[0-9a-f]+ /);
      expect(sent[1]).toMatch(/^BEGIN;\nEXECUTE inboxkit_takeover_[0-9a-f]+ \('take-over'::text, 's1'::text/s);
      expect(sent[3]).toBe('COMMIT');
      sent.length = 0;
      expect((await consumer.handle(message('s2'))).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect(sent[0]).toMatch(/^BEGIN;\nEXECUTE inboxkit_takeover_/);
      // Once handled, an id is claimed as new again: its duplicate takes the lean claim and is answered at once.
      expect((await consumer.handle(message('s2'))).status).toBe('duplicate');
      expect(attempts).toEqual([1, 1, 1]);
      expect(await countEffects(t.db, t.schema, 'take-over')).toBe(3);
      // A redelivery (the broker's count above 1) takes the take-over claim too, and applies a new id once.
      sent.length = 0;
      expect((await consumer.handle({ ...message('r1'), deliveryCount: 2 })).status).toBe('processed');
      expect(sent[0]).toMatch(/^BEGIN;\nEXECUTE inboxkit_takeover_/);
      expect(await countEffects(t.db, t.schema, 'take-over', 'r1')).toBe(1);
    } finally {
      await db.destroy();
    }
  });

  it('sends one statement per round trip when pipelining is off, with the same outcomes', async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-off');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'no-pipelining',
        store: new PostgresInboxStore({ db, schema: t.schema, pipelining: 'off' }),
        handler: async (m, { tx }) => insertEffect(tx, t.schema, 'no-pipelining', m.id),
      });
      expect((await consumer.handle(message('m1'))).status).toBe('processed');
      expect(sent.filter((s) => s.includes(';\n'))).toEqual([]);
      expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
      expect(await countEffects(t.db, t.schema, 'no-pipelining')).toBe(1);
    } finally {
      await db.destroy();
    }
  });

  it('prepares the claim again after the session lost it (DISCARD ALL)', async () => {
    const pool = new pg.Pool({ connectionString: t.url, max: 1 });
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'discard',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        handler: async (m, { tx }) => insertEffect(tx, t.schema, 'discard', m.id),
      });
      expect((await consumer.handle(message('m1'))).status).toBe('processed');
      await sql`DISCARD ALL`.execute(db);
      expect((await consumer.handle(message('m2'))).status).toBe('processed');
      expect((await consumer.handle(message('m2'))).status).toBe('duplicate');
    } finally {
      await db.destroy();
    }
  });

  it("applies the application's plugins to the handler's transaction, never to the store's statements", async () => {
    const pool = new pg.Pool({ connectionString: t.url, max: 2 });
    interface CamelDB {
      effects: { consumer: string; messageId: string };
    }
    const db = new Kysely<CamelDB>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] });
    try {
      const consumer = idempotentConsumer<unknown, Transaction<CamelDB>>({
        name: 'camel',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        handler: async (m, { tx }) => {
          await tx.withSchema(t.schema).insertInto('effects').values({ consumer: 'camel', messageId: m.id }).execute();
        },
      });
      expect((await consumer.handle(message('m1'))).status).toBe('processed');
      expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
      expect(await countEffects(t.db, t.schema, 'camel', 'm1')).toBe(1);
    } finally {
      await db.destroy();
    }
  });

  it('refuses the handler transaction after the handler returned, and nested transactions inside it', async () => {
    let leaked: TestTx | undefined;
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'misuse',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      maxAttempts: 1,
      handler: async (m, { tx }) => {
        leaked = tx;
        if (m.id === 'nested') await tx.transaction().execute(async () => undefined);
      },
    });
    expect((await consumer.handle(message('m1'))).status).toBe('processed');
    await expect(insertEffect(leaked!, t.schema, 'misuse', 'late')).rejects.toThrow(/transaction has ended/);
    const nested = await consumer.handle(message('nested'));
    expect(nested).toMatchObject({ status: 'dead-letter', reason: 'max-attempts' });
    expect((nested as { error: { message: string } }).error.message).toMatch(/transaction method for a Transaction is not supported/);
  });

  it('does not ack a message whose handler swallowed a failed statement: nothing was committed', async () => {
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'swallow',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, { tx }) => {
        await insertEffect(tx, t.schema, 'swallow', m.id);
        if (m.id.startsWith('bad')) await sql`SELECT 1 / 0`.execute(tx).catch(() => undefined);
      },
    });
    expect(await consumer.handle(message('bad-1'))).toMatchObject({ status: 'retry', reason: 'handler-error' });
    const outcomes = await consumer.handleBatch([message('ok-1'), message('bad-2'), message('ok-2')]);
    expect(outcomes.map((o) => o.status)).toEqual(['processed', 'retry', 'processed']);
    expect(await countEffects(t.db, t.schema, 'swallow', 'bad-1')).toBe(0);
    expect(await countEffects(t.db, t.schema, 'swallow', 'bad-2')).toBe(0);
    expect(await countEffects(t.db, t.schema, 'swallow')).toBe(2);
  });

  it('claims a batch of new ids with the lean batch claim, and takes rows that are due over in the same transaction', async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-lean-batch');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const name = 'lean-batch';
      const store = new PostgresInboxStore({ db, schema: t.schema });
      const attempts = new Map<string, number[]>();
      const failing = new Map([
        ['due', 0],
        ['later', 60_000],
      ]);
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store,
        maxAttempts: 3,
        handler: async (m, { tx, attempt }) => {
          attempts.set(m.id, [...(attempts.get(m.id) ?? []), attempt]);
          const delayMs = failing.get(m.id);
          failing.delete(m.id);
          if (delayMs !== undefined) throw new RetryableError('not yet', { delayMs });
          await insertEffect(tx, t.schema, name, m.id);
        },
      });
      expect(await consumer.handle(message('due'))).toMatchObject({ status: 'retry', reason: 'handler-error' });
      expect(await consumer.handle(message('later'))).toMatchObject({ status: 'retry', reason: 'handler-error' });
      expect(await consumer.handle(message('done'))).toMatchObject({ status: 'processed' });
      expect(await consumer.handle(message('other', { v: 1 }))).toMatchObject({ status: 'processed' });
      sent.length = 0;
      const outcomes = await consumer.handleBatch([
        message('n1'),
        message('due'),
        message('later'),
        message('done'),
        message('other', { v: 2 }),
        message('n2'),
      ]);
      expect(outcomes.map((o) => `${o.messageId}:${o.status}:${'reason' in o ? o.reason : ''}`)).toEqual([
        'n1:processed:',
        'due:processed:',
        'later:retry:handler-error',
        'done:duplicate:completed',
        'other:dead-letter:payload-mismatch',
        'n2:processed:',
      ]);
      // BEGIN and the lean claim in one round trip; the row that was due, taken over by the full claim after it.
      expect(sent[0]).toMatch(/^BEGIN;\nWITH inserted AS \(\nINSERT INTO .*\nON CONFLICT \(consumer, message_id\) DO NOTHING/s);
      expect(sent[1]).toMatch(/^WITH claimed AS \(.*'due'/s);
      expect(sent[1]).not.toMatch(/'n1'|'later'|'done'/);
      expect(attempts.get('due')).toEqual([1, 2]);
      expect(attempts.get('later')).toEqual([1]); // not due: not run again
      for (const id of ['n1', 'due', 'done', 'other', 'n2']) expect(await countEffects(t.db, t.schema, name, id)).toBe(1);
      expect(await countEffects(t.db, t.schema, name, 'later')).toBe(0);

      // A delivery whose broker count is beyond maxAttempts is not inserted by the lean claim: it is dead-lettered
      // without running, beside a new id that runs.
      const settings = { consumer: name, maxAttempts: 3, dedupeWindowMs: 86_400_000, lockTimeoutMs: 5_000 };
      const request = (messageId: string, deliveryCount: number) => ({
        messageId,
        fingerprint: 'f'.repeat(64),
        messageTimestamp: undefined,
        deliveryCount,
        replayId: undefined,
      });
      const ran: string[] = [];
      const runs = await store.runTransactionalBatch(
        settings,
        [request('n3', 1), request('beyond', 4)],
        async (tx, claimed) => {
          ran.push(claimed.messageId);
          await insertEffect(tx, t.schema, name, claimed.messageId);
        },
        () => {
          throw new Error('no failure expected');
        },
      );
      expect(runs.map((r) => r.kind)).toEqual(['completed', 'exhausted']);
      expect(ran).toEqual(['n3']);
      const [beyond] = await store.findRows(name, ['beyond']);
      expect(beyond).toMatchObject({ status: 'dead_lettered', deadLetterReason: 'max-attempts' });

      // A completed row with the delivery's payload is answered as a plain duplicate, without its state; with
      // another payload, with the row (the consumer dead-letters it as payload-mismatch).
      const [done] = await store.findRows(name, ['done']);
      const same = { ...request('done', 1), fingerprint: done!.fingerprint! };
      const unused = async () => {
        throw new Error('not claimed: the handler must not run');
      };
      expect(await store.runTransactional(settings, same, unused)).toEqual({ kind: 'duplicate' });
      const batch = await store.runTransactionalBatch(settings, [same, request('other', 1), request('n4', 1)], async (tx, claimed) => {
        await insertEffect(tx, t.schema, name, claimed.messageId);
      }, () => {
        throw new Error('no failure expected');
      });
      expect(batch[0]).toEqual({ kind: 'duplicate' });
      expect(batch[1]).toMatchObject({ kind: 'not-claimed', row: { messageId: 'other', status: 'completed' } });
      expect(batch[2]).toMatchObject({ kind: 'completed' });
    } finally {
      await db.destroy();
    }
  });

  it("reads a batch's rows by probes of the primary key even where the statistics do not know the consumer", async () => {
    // A consumer's rows grown since the last ANALYZE (autovacuum off here, so none comes): Postgres estimates a
    // handful of rows for the consumer. A read written as `consumer = … AND message_id = ANY(ids)` was then
    // planned as a scan of every row of the consumer, filtered by id.
    const blind = await openTestDatabase('stats_blind');
    const { pool, sent } = recordingPool(blind.url, 'inboxkit-stats-blind');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const inbox = `"${blind.schema}".inbox`;
      await blind.pool.query(`ALTER TABLE ${inbox} SET (autovacuum_enabled = false)`);
      await blind.pool.query(
        `INSERT INTO ${inbox} (consumer, message_id, status, expires_at)
         SELECT 'blind', 'old-' || g, 'completed', now() + interval '1 day' FROM generate_series(1, 50000) g`,
      );
      const store = new PostgresInboxStore({ db, schema: blind.schema });
      const name = 'blind';
      let failDue = true;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store,
        handler: async (m, { tx }) => {
          if (m.id === 'due' && failDue) {
            failDue = false;
            throw new RetryableError('once', { delayMs: 0 });
          }
          await insertEffect(tx, blind.schema, name, m.id);
        },
      });
      expect(await consumer.handle(message('due'))).toMatchObject({ status: 'retry' });
      const ids = ['due', 'old-7', 'old-49999', ...Array.from({ length: 197 }, (_, i) => `new-${i}`)];
      sent.length = 0;
      const outcomes = await consumer.handleBatch(ids.map((id) => message(id)));
      expect(outcomes.map((o) => o.status)).toEqual(['processed', 'duplicate', 'duplicate', ...ids.slice(3).map(() => 'processed')]);
      await store.findRows(name, ids);
      const lean = sent.find((q) => q.startsWith('BEGIN;\nWITH inserted AS'))?.slice('BEGIN;\n'.length);
      const full = sent.find((q) => q.startsWith('WITH claimed AS'));
      const rows = sent.find((q) => q.includes('lease_remaining_ms') && q.startsWith('SELECT'));
      expect([lean, full, rows].map((q) => typeof q)).toEqual(['string', 'string', 'string']);

      /** Inbox rows (and index entries) each plan node read, filtered out ones included, over all its loops. */
      const rowsRead = async (statement: string): Promise<number> => {
        const client = await blind.pool.connect();
        try {
          await client.query('BEGIN');
          const { rows: plan } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`);
          let read = 0;
          const walk = (node: Record<string, unknown>): void => {
            if (node['Relation Name'] === 'inbox' || node['Index Name'] === 'inbox_pkey') {
              const removed = Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0);
              read += (Number(node['Actual Rows']) + removed) * Number(node['Actual Loops'] ?? 1);
            }
            for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) walk(child);
          };
          walk((plan[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
          return read;
        } finally {
          await client.query('ROLLBACK');
          client.release();
        }
      };
      // Each statement touches a few rows per id; a scan of the consumer's rows would read 50,000.
      const read = { lean: await rowsRead(lean!), full: await rowsRead(full!), rows: await rowsRead(rows!) };
      const bound = 4 * ids.length;
      expect(Object.entries(read).filter(([, n]) => n > bound)).toEqual([]);
    } finally {
      await db.destroy();
      await blind.close();
    }
  });

  it.each(['on-failure', 'always'] as const)(
    'isolates a failing message of a batch with batchSavepoints %s',
    async (batchSavepoints) => {
      const name = `batch-${batchSavepoints}`;
      const runs = new Map<string, number>();
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema, batchSavepoints }),
        handler: async (m, { tx }) => {
          runs.set(m.id, (runs.get(m.id) ?? 0) + 1);
          await insertEffect(tx, t.schema, name, m.id);
          if (m.id === 'bad') throw new Error('bad one');
        },
      });
      const outcomes = await consumer.handleBatch([message('a'), message('bad'), message('b')]);
      expect(outcomes.map((o) => o.status)).toEqual(['processed', 'retry', 'processed']);
      expect(await countEffects(t.db, t.schema, name)).toBe(2);
      expect(await countEffects(t.db, t.schema, name, 'bad')).toBe(0);
      // The optimistic pass ran 'a' and 'bad' before rolling back; the isolated pass ran all three.
      expect(runs.get('a')).toBe(batchSavepoints === 'on-failure' ? 2 : 1);
      expect(runs.get('b')).toBe(1);
    },
  );

  it('never returns a connection to the pool inside a transaction', async () => {
    const app = `inboxkit-idle-${randomBytes(3).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: t.url, max: 3, application_name: app });
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const store = new PostgresInboxStore({ db, schema: t.schema });
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'idle',
        store,
        maxAttempts: 2,
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, 'idle', m.id);
          if (m.id.startsWith('fail')) throw new Error('no');
        },
      });
      await Promise.all(['a', 'b', 'fail-1', 'a', 'fail-1', 'c'].map((id) => consumer.handle(message(id))));
      await consumer.handleBatch([message('d'), message('fail-2'), message('d')]);
      // Whatever the pool hands out next starts outside a transaction. A duplicate's ROLLBACK is sent without
      // waiting for its answer, so it may still be on its way, but node-postgres sends it before anything the
      // next borrower sends: in a fresh transaction now() is this statement's own start.
      const borrowed = await Promise.all([pool.connect(), pool.connect(), pool.connect()]);
      try {
        for (const client of borrowed) {
          const { rows } = await client.query<{ fresh: boolean }>('SELECT now() = statement_timestamp() AS fresh');
          expect(rows[0]!.fresh).toBe(true);
        }
      } finally {
        for (const client of borrowed) client.release();
      }
      const idleInTx = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${app} AND state <> 'idle'`.execute(t.db);
      expect(idleInTx.rows[0]!.n).toBe(0);
    } finally {
      await db.destroy();
    }
  });

  it('lets one pruner run at a time through an advisory lock', async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'prune-lock',
      store,
      dedupeWindowMs: 1,
      maxAttempts: 1,
      handler: async (m, { tx }) => insertEffect(tx, t.schema, 'prune-lock', m.id),
    });
    for (let i = 0; i < 5; i++) await consumer.handle(message(`m${i}`));
    await new Promise((r) => setTimeout(r, 20));
    const holder = await t.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1::bigint)', [store.pruneLockKey.toString()]);
      expect(await store.prune({ consumer: 'prune-lock' })).toEqual({ status: 'locked', deleted: 0, batches: 0 });
      await holder.query('SELECT pg_advisory_unlock($1::bigint)', [store.pruneLockKey.toString()]);
    } finally {
      holder.release();
    }
    expect(await store.prune({ consumer: 'prune-lock' })).toMatchObject({ status: 'pruned', deleted: 5 });
    const concurrent = await Promise.all([store.prune(), store.prune(), store.prune()]);
    expect(concurrent.every((r) => r.status === 'pruned' || r.status === 'locked')).toBe(true);
  });

  it('prunes on a schedule until stopped', async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'scheduled',
      store,
      dedupeWindowMs: 1,
      maxAttempts: 1,
      handler: async (m, { tx }) => insertEffect(tx, t.schema, 'scheduled', m.id),
    });
    await consumer.handle(message('m1'));
    const results: number[] = [];
    let seen!: () => void;
    const pruned = new Promise<void>((r) => (seen = r));
    const pruner = startPruner(store, {
      consumer: 'scheduled',
      intervalMs: 30,
      onPrune: (r) => {
        results.push(r.deleted);
        if (r.deleted > 0) seen();
      },
    });
    await pruned;
    await pruner.stop();
    const runs = results.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(results.length).toBe(runs);
    expect(await store.findRows('scheduled', ['m1'])).toEqual([]);
    expect(await pruner.runNow()).toMatchObject({ status: 'pruned', deleted: 0 });
  });
});
