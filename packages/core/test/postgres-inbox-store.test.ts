// What only the Postgres store does: round trips per delivery (the claim function sent with BEGIN), a session
// that lost its state (DISCARD ALL), the application's plugins applied to the handler's transaction and not to
// the store's own statements, handlers that misuse their transaction, the prune lock, and connections always
// returned outside a transaction.

import { randomBytes } from 'node:crypto';
import { CamelCasePlugin, Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attemptLedgerOf } from '../src/delivery/attempt-ledger.js';
import { PermanentError, RetryableError, StoreUnavailableError } from '../src/errors.js';
import { fingerprintJson } from '../src/fingerprint.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { InboxSql } from '../src/postgres/inbox-sql.js';
import { PostgresInboxStore, resolveInboxTableNames } from '../src/postgres/index.js';
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

  it("sends BEGIN and the claim of a new id (with its lock timeout) in one round trip; a duplicate is that round trip and a ROLLBACK nobody waits for", async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-rt');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'round-trips',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        handler: async (m, { tx }) => insertEffect(tx, t.schema, 'round-trips', m.id),
      });
      await consumer.handle(message('warm-up')); // the driver is probed once
      sent.length = 0;
      expect((await consumer.handle(message('m1'))).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect(sent[0]).toMatch(
        /^BEGIN;\nSELECT "[^"]+"\."inbox_claim"\('round-trips'::text, 'm1'::text, '[0-9a-f]{64}'::text, .*'5000'::text, NULL::uuid, NULL::float8\) AS answer$/s,
      );
      expect(sent[1]).toMatch(/insert into/i);
      expect(sent[2]).toBe('COMMIT');
      sent.length = 0;
      expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
      // The claim's round trip; its ROLLBACK was sent before handle() resolved, without a wait for its answer.
      expect(sent).toEqual([expect.stringMatching(/^BEGIN;\nSELECT "[^"]+"\."inbox_claim"\('round-trips'::text, 'm1'::text/s), 'ROLLBACK']);
      sent.length = 0;
      expect((await consumer.handle(message('m2'))).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect(await countEffects(t.db, t.schema, 'round-trips')).toBe(3);
    } finally {
      await db.destroy();
    }
  });

  it("an operator's act waits for a delivery holding the row: it sees the delivery's outcome, or gives up after 5 s changing nothing", async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const name = 'operator-waits';
    let fail = true;
    let hold: Promise<void> = Promise.resolve();
    let entered: () => void = () => undefined;
    const consumer = idempotentConsumer<unknown, TestTx>({
      name,
      store,
      handler: async (m, { tx }) => {
        if (fail) throw new PermanentError('bad');
        entered();
        await hold;
        await insertEffect(tx, t.schema, name, m.id);
      },
    });
    const fp = (p: unknown): string => fingerprintJson(JSON.stringify(p), p);
    for (const id of ['m1', 'm2']) expect((await consumer.handle(message(id))).status).toBe('dead-letter');
    fail = false;
    const amend = (id: string) =>
      store.amendDeadLetter({
        consumer: name, messageId: id, fromFingerprint: fp({ id }), toFingerprint: fp({ id, fixed: true }),
        replayId: `edit-${id}`, requestedBy: 'ops', reason: 'race',
      });

    // A replay holds m1 while its handler runs; the amendment waits for it and then finds the row completed.
    let release: () => void = () => undefined;
    hold = new Promise((r) => (release = r));
    let running = new Promise<void>((r) => (entered = r));
    const replay = consumer.handle({ ...message('m1'), replay: { replayId: 'r1' } });
    await running;
    const amended = amend('m1');
    release();
    expect(await replay).toMatchObject({ status: 'processed' });
    expect(await amended).toMatchObject({ kind: 'not-dead-lettered', row: { status: 'completed', fingerprint: fp({ id: 'm1' }) } });

    // A delivery holding m2 longer than 5 s: the act gives up, nothing written.
    hold = new Promise((r) => (release = r));
    running = new Promise<void>((r) => (entered = r));
    const long = consumer.handle({ ...message('m2'), replay: { replayId: 'r2' } });
    await running;
    await expect(amend('m2')).rejects.toThrow(StoreUnavailableError);
    release();
    expect(await long).toMatchObject({ status: 'processed' });
    expect(await countEffects(t.db, t.schema, name)).toBe(2);
    const audit = await store.listReplays({ consumer: name });
    expect(audit.filter((a) => a.outcome.startsWith('amended'))).toEqual([]);
  });

  it('claims an id whose attempt was recorded as started with the same one statement, in the same round trip as BEGIN', async () => {
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
      await attemptLedgerOf(consumer)!.recordAttemptsStarted([message('s1'), message('s2')]);
      sent.length = 0;
      expect((await consumer.handle(message('s1'))).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect(sent[0]).toMatch(/^BEGIN;\nSELECT "[^"]+"\."inbox_claim"\('take-over'::text, 's1'::text/s);
      expect(sent[2]).toBe('COMMIT');
      sent.length = 0;
      expect((await consumer.handle(message('s2'))).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect((await consumer.handle(message('s2'))).status).toBe('duplicate');
      expect(attempts).toEqual([1, 1, 1]);
      expect(await countEffects(t.db, t.schema, 'take-over')).toBe(3);
      const [s1] = await new PostgresInboxStore({ db, schema: t.schema }).findRows('take-over', ['s1']);
      expect(s1).toMatchObject({ status: 'completed', attempts: 1, startedAttempts: 1, claimedFrom: 'processing' });
      // A redelivery (the broker's count above 1) of a new id: the same statement, applied once.
      sent.length = 0;
      expect((await consumer.handle({ ...message('r1'), deliveryCount: 2 })).status).toBe('processed');
      expect(sent).toHaveLength(3);
      expect(await countEffects(t.db, t.schema, 'take-over', 'r1')).toBe(1);
    } finally {
      await db.destroy();
    }
  });

  it('answers a duplicate that arrives while its original runs in the one round trip that waited for it', async () => {
    const { pool, sent } = recordingPool(t.url, 'inboxkit-in-flight');
    const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let running = false;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name: 'in-flight',
        store: new PostgresInboxStore({ db, schema: t.schema }),
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, 'in-flight', m.id);
          if (m.id !== 'slow') return;
          running = true;
          await gate;
        },
      });
      await consumer.handle(message('warm-up'));
      const original = consumer.handle(message('slow'));
      while (!running) await new Promise((r) => setTimeout(r, 2));
      sent.length = 0;
      const duplicate = consumer.handle(message('slow'));
      // The duplicate's claim waits on the original's row.
      while (sent.length === 0) await new Promise((r) => setTimeout(r, 2));
      await new Promise((r) => setTimeout(r, 30));
      release();
      expect(await original).toMatchObject({ status: 'processed' });
      expect(await duplicate).toMatchObject({ status: 'duplicate' });
      // Its claim's round trip (sent with BEGIN) and a ROLLBACK: no second read once the wait ended.
      // (The guard's lookup of a pooled client's wire, on its first use, sends nothing.)
      const duplicates = sent.filter((q) => q !== 'COMMIT' && !q.includes('nothing sent'));
      expect(duplicates).toEqual([expect.stringMatching(/^BEGIN;\nSELECT "[^"]+"\."inbox_claim"\('in-flight'::text, 'slow'::text/), 'ROLLBACK']);
      expect(await countEffects(t.db, t.schema, 'in-flight', 'slow')).toBe(1);
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

  it('keeps working after the session lost its state (DISCARD ALL)', async () => {
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
        // Cast: kysely 0.29 types a Transaction's transaction() as never; the refusal is what this test checks.
        if (m.id === 'nested') await (tx as unknown as Kysely<unknown>).transaction().execute(async () => undefined);
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

  it('claims a batch in one statement sent with BEGIN: new ids, rows that are due taken over, duplicates answered', async () => {
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
      // BEGIN and the batch claim in one round trip, the row that was due taken over by it; then the four
      // handlers' statements and COMMIT.
      expect(sent[0]).toMatch(
        /^BEGIN;\nSELECT v\.id AS message_id, "[^"]+"\."inbox_claim"\('lean-batch'::text, v\.id, .*unnest\(ARRAY\['n1','due','later','done','other','n2'\]::text\[\]/s,
      );
      expect(sent).toHaveLength(5);
      expect(sent[4]).toBe('COMMIT');
      expect(attempts.get('due')).toEqual([1, 2]);
      expect(attempts.get('later')).toEqual([1]); // not due: not run again
      for (const id of ['n1', 'due', 'done', 'other', 'n2']) expect(await countEffects(t.db, t.schema, name, id)).toBe(1);
      expect(await countEffects(t.db, t.schema, name, 'later')).toBe(0);

      // A delivery whose broker count is beyond maxAttempts is not inserted by the batch claim: it is dead-lettered
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
      sent.length = 0;
      expect((await store.findRows(name, ids)).length).toBe(ids.length);
      const rows = sent.find((q) => q.includes('unnest($2::text[])'));
      expect(typeof rows).toBe('string');
      // Ids that all have a row: each one's read goes past the insert.
      const again = [...ids.slice(0, 3), ...Array.from({ length: 197 }, (_, i) => `old-${i + 100}`)];
      const request = (messageId: string) => ({ messageId, fingerprint: 'f'.repeat(64), messageTimestamp: undefined, deliveryCount: 1, replayId: undefined });
      const claim = new InboxSql(resolveInboxTableNames({ schema: blind.schema })).claimBatch(
        { consumer: name, maxAttempts: 5, dedupeWindowMs: 86_400_000, lockTimeoutMs: 5_000 },
        again.map(request),
      );

      /**
       * Inbox rows (and index entries) a statement read: the claim's from the table's statistics of the
       * statement's own transaction (its reads run inside the function), the rows' read from its plan.
       */
      const rowsRead = async (statement: string, parameters: unknown[], explain: boolean): Promise<number> => {
        const client = await blind.pool.connect();
        try {
          await client.query('BEGIN');
          if (!explain) {
            await client.query(statement, parameters);
            const { rows: stats } = await client.query(
              `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`,
              [inbox],
            );
            return Number(stats[0]?.n ?? 0);
          }
          const { rows: plan } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`, parameters);
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
      const read = {
        claim: await rowsRead(claim.sql, [...claim.parameters], false),
        rows: await rowsRead(rows!, [name, ids], true),
      };
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
