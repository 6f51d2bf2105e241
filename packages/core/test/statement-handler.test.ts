// statementHandler(): a handler that is only SQL statements built from the message. On the Postgres store over
// node-postgres a delivery, or a batch, is one autocommit call of a temporary function that runs the claim and,
// only if it took the delivery, the statements; everywhere else (and with `temporaryFunctions: false`) they run
// on context.tx.
// Each test checks the effect exactly once, and the statements sent where the round trips are the point.

import { randomBytes } from 'node:crypto';
import { CompiledQuery, Kysely, PostgresDialect, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { attemptLedgerOf } from '../src/delivery/attempt-ledger.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { migrateInbox, PostgresInboxStore } from '../src/postgres/index.js';
import { statementHandler } from '../src/statement-handler.js';
import { recordingLogger } from '../../../test/support/recording-logger.js';
import { openTestDatabase, recordingPool, type TestDatabase } from './support/postgres.js';

interface Payload {
  readonly order: string;
  readonly total: number;
  readonly note?: string;
}

interface DB {
  orders: { order_id: string; total: number; note: string | null; raw: Buffer | null };
}

const message = (id: string, payload: Payload): InboundMessage => ({
  id,
  body: JSON.stringify(payload),
  headers: {},
  source: { transport: 'memory' },
});


describe('statementHandler', () => {
  let t: TestDatabase;
  let db: Kysely<DB>;
  let sent: string[];
  let orders: string;
  beforeAll(async () => {
    t = await openTestDatabase('statement_handler');
    const recording = recordingPool(t.url, 'inboxkit-statement-handler');
    sent = recording.sent;
    db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: recording.pool }) }).withSchema(t.schema);
    orders = `"${t.schema}".orders`;
    await t.pool.query(
      `CREATE TABLE ${orders} (consumer text NOT NULL, order_id text NOT NULL, total int NOT NULL CHECK (total >= 0), note text, raw bytea, PRIMARY KEY (consumer, order_id))`,
    );
  });
  afterAll(async () => {
    await db?.destroy();
    await t?.close();
  });

  const rowsOf = async (consumer: string): Promise<Record<string, unknown>[]> =>
    (await t.pool.query(`SELECT order_id, total, note, raw FROM ${orders} WHERE consumer = $1 ORDER BY order_id`, [consumer])).rows;

  const consumerFor = (
    name: string,
    build?: (p: Payload, id: string) => ReturnType<Parameters<typeof statementHandler<Payload>>[0]>,
    temporaryFunctions?: boolean,
  ) =>
    idempotentConsumer<Payload, Transaction<DB>>({
      name,
      store: new PostgresInboxStore({ db, schema: t.schema, ...(temporaryFunctions === undefined ? {} : { temporaryFunctions }) }),
      backoff: { initialDelayMs: 0, jitter: 'none' },
      // The failing statements here break a CHECK (23514), which is permanent by default; these tests retry it,
      // as an application that means to deploy a fix would, through the documented override.
      isRetriable: () => true,
      handler: statementHandler<Payload, Transaction<DB>>(
        (m) =>
          build?.(m.payload, m.id) ??
          db
            .insertInto('orders')
            .values({ consumer: name, order_id: m.payload.order, total: m.payload.total, note: m.payload.note ?? null } as never),
      ),
    });

  it('claims and runs the statements in one round trip, and answers a duplicate in one with nothing owed', async () => {
    const consumer = consumerFor('once');
    // The first delivery on a connection creates the functions and prepares the statement there first.
    expect(await consumer.handle(message('m0', { order: 'o0', total: 1 }))).toMatchObject({ status: 'processed' });
    expect(sent.some((q) => q.startsWith('CREATE FUNCTION pg_temp.inboxkit_once('))).toBe(true);
    expect(sent.some((q) => q.startsWith('PREPARE inboxkit_fx_'))).toBe(true);
    expect(sent.some((q) => q.startsWith('BEGIN'))).toBe(false);
    sent.length = 0;
    expect(await consumer.handle(message('m1', { order: 'o1', total: 5, note: "it's \\ fine" }))).toMatchObject({ status: 'processed' });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(
      /^SELECT message_id, answer FROM pg_temp\.inboxkit_once\('SELECT ''''::text AS message_id, answer FROM \(SELECT "[^"]+"\."inbox_claim"\(''once''::text, ''m1''::text, .*ARRAY\[ ?E?'EXECUTE inboxkit_fx_[0-9a-f]{16} \(''once'', ''o1'', ''5'',/s,
    );
    sent.length = 0;
    expect(await consumer.handle(message('m1', { order: 'o1', total: 5, note: "it's \\ fine" }))).toMatchObject({ status: 'duplicate' });
    // No ROLLBACK owed: the next turn sends nothing.
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toHaveLength(1);
    expect(await consumer.handle(message('m1', { order: 'o1', total: 6 }))).toMatchObject({
      status: 'dead-letter',
      reason: 'payload-mismatch',
    });
    expect(await rowsOf('once')).toEqual([
      { order_id: 'o0', total: 1, note: null, raw: null },
      { order_id: 'o1', total: 5, note: "it's \\ fine", raw: null },
    ]);
  });

  it("without temporary functions, runs the statements on the handler's transaction, after BEGIN and the claim", async () => {
    const consumer = consumerFor('rt', undefined, false);
    expect(await consumer.handle(message('m0', { order: 'o0', total: 1 }))).toMatchObject({ status: 'processed' });
    sent.length = 0;
    expect(await consumer.handle(message('m1', { order: 'o1', total: 5, note: "it's \\ fine" }))).toMatchObject({ status: 'processed' });
    expect(sent).toHaveLength(3);
    expect(sent[0]).toMatch(/^BEGIN;\nSELECT "[^"]+"\."inbox_claim"\('rt'::text, 'm1'::text/);
    expect(sent[1]).toMatch(/^insert into "[^"]+"\."orders"/);
    expect(sent[2]).toBe('COMMIT');
    sent.length = 0;
    expect(await consumer.handle(message('m1', { order: 'o1', total: 5, note: "it's \\ fine" }))).toMatchObject({ status: 'duplicate' });
    expect(sent).toEqual([expect.stringMatching(/^BEGIN;\nSELECT /), 'ROLLBACK']);
    expect(await consumer.handle(message('m1', { order: 'o1', total: 6 }))).toMatchObject({
      status: 'dead-letter',
      reason: 'payload-mismatch',
    });
    expect(await rowsOf('rt')).toEqual([
      { order_id: 'o0', total: 1, note: null, raw: null },
      { order_id: 'o1', total: 5, note: "it's \\ fine", raw: null },
    ]);
  });

  it('fails the attempt when a statement fails, commits nothing, and applies the retry once', async () => {
    const consumer = consumerFor('fail');
    expect(await consumer.handle(message('warm', { order: 'w', total: 1 }))).toMatchObject({ status: 'processed' });
    // total -1 breaks the CHECK: the claim's row and the effect roll back together.
    expect(await consumer.handle(message('m2', { order: 'o2', total: -1 }))).toMatchObject({ status: 'retry', reason: 'handler-error' });
    expect(await rowsOf('fail')).toEqual([{ order_id: 'w', total: 1, note: null, raw: null }]);
    const [row] = (await t.pool.query(`SELECT status, attempts FROM "${t.schema}".inbox WHERE consumer = 'fail' AND message_id = 'm2'`)).rows;
    expect(row).toEqual({ status: 'failed', attempts: 1 });
    // The same id with a builder that now succeeds (a fixed deploy): attempt 2, applied once.
    const fixed = consumerFor('fail', (p) =>
      db.insertInto('orders').values({ consumer: 'fail', order_id: p.order, total: Math.abs(p.total) } as never),
    );
    expect(await fixed.handle(message('m2', { order: 'o2', total: -1 }))).toMatchObject({ status: 'processed', attempt: 2 });
    expect(await fixed.handle(message('m2', { order: 'o2', total: -1 }))).toMatchObject({ status: 'duplicate' });
    expect((await rowsOf('fail')).map((r) => r['order_id'])).toEqual(['o2', 'w']);
  });

  it('applies each of 20 ids once under 10 concurrent deliveries of each', async () => {
    const consumer = consumerFor('concurrent');
    const ids = Array.from({ length: 20 }, (_, i) => `c${i}`);
    const outcomes = await Promise.all(
      ids.flatMap((id) => Array.from({ length: 10 }, () => consumer.handle(message(id, { order: id, total: 1 })))),
    );
    const processed = outcomes.filter((o) => o.status === 'processed').map((o) => o.messageId);
    expect(new Set(processed).size).toBe(processed.length);
    expect(outcomes.every((o) => ['processed', 'duplicate', 'retry'].includes(o.status))).toBe(true);
    // Retries (a concurrent copy still held the row) are delivered again until none is left.
    for (const id of ids) await consumer.handle(message(id, { order: id, total: 1 }));
    expect((await rowsOf('concurrent')).map((r) => r['order_id']).sort()).toEqual([...ids].sort());
  });

  it('runs on the handler transaction what cannot go as literals or will not prepare: binary data, several statements', async () => {
    const binary = consumerFor('binary', (p) =>
      db.insertInto('orders').values({ consumer: 'binary', order_id: p.order, total: p.total, raw: Buffer.from([0, 1, 255]) } as never),
    );
    for (const n of [1, 2, 3]) expect(await binary.handle(message(`b${n}`, { order: `b${n}`, total: n }))).toMatchObject({ status: 'processed' });
    expect((await rowsOf('binary')).map((r) => r['raw'])).toEqual([1, 2, 3].map(() => Buffer.from([0, 1, 255])));

    const several = consumerFor('several', (p) =>
      CompiledQuery.raw(`INSERT INTO ${orders} (consumer, order_id, total) VALUES ('several', '${p.order}', 1); SELECT 1`),
    );
    sent.length = 0;
    for (const n of [1, 2, 3]) expect(await several.handle(message(`s${n}`, { order: `s${n}`, total: 1 }))).toMatchObject({ status: 'processed' });
    expect((await rowsOf('several')).map((r) => r['order_id'])).toEqual(['s1', 's2', 's3']);
    expect(sent.filter((q) => q.includes('EXECUTE inboxkit_fx_'))).toEqual([]);
    expect(await several.handle(message('s1', { order: 's1', total: 1 }))).toMatchObject({ status: 'duplicate' });
  });

  it('writes every parameter type exactly as node-postgres binds it', async () => {
    // The same values inserted by the one-round-trip path (literals) and by node-postgres (bind parameters).
    await t.pool.query(
      `CREATE TABLE "${t.schema}".typed (via text, id text, t text, n int, f float8, b bool, j jsonb, a text[], ts timestamptz, d date, big bigint, x numeric, PRIMARY KEY (via, id))`,
    );
    const values = (id: string): unknown[] => [
      id,
      `it's a \\ back'slash, "quotes", ünïcödé ✓ and $1 ${'$$'}`,
      -42,
      1.5e-7,
      true,
      { nested: { list: [1, 'two', null] }, quote: "'" },
      ['a', 'b,c', 'd"e', "f'g", 'h\\i', ''],
      new Date(Date.UTC(2026, 11, 1, 23, 59, 58, 123)),
      '2026-02-28',
      9007199254740993n,
      '12345678901234567890.123456789',
    ];
    const insert = `INSERT INTO "${t.schema}".typed (via, id, t, n, f, b, j, a, ts, d, big, x) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`;
    const one = recordingPool(t.url, 'inboxkit-statement-types', 1);
    const oneDb = new Kysely<DB>({ dialect: new PostgresDialect({ pool: one.pool }) });
    onTestFinished(() => oneDb.destroy());
    const consumer = idempotentConsumer<Payload, Transaction<DB>>({
      name: 'types',
      store: new PostgresInboxStore({ db: oneDb, schema: t.schema }),
      handler: statementHandler<Payload, Transaction<DB>>((m) => CompiledQuery.raw(insert, ['literal', ...values(m.id)])),
    });
    for (const id of ['k1', 'k2', 'k3']) {
      expect(await consumer.handle(message(id, { order: id, total: 1 }))).toMatchObject({ status: 'processed' });
      await t.pool.query(insert, ['bind', ...values(id)]);
    }
    // Each as literals in the one-round-trip call (the statement prepared on the connection before the first).
    expect(one.sent.filter((q) => q.includes('EXECUTE inboxkit_fx_'))).toHaveLength(3);
    const { rows } = await t.pool.query(
      `SELECT id, t, n, f, b, j, a, ts, d::text, big::text, x::text FROM "${t.schema}".typed WHERE via = $1 ORDER BY id`,
      ['literal'],
    );
    const { rows: bound } = await t.pool.query(
      `SELECT id, t, n, f, b, j, a, ts, d::text, big::text, x::text FROM "${t.schema}".typed WHERE via = $1 ORDER BY id`,
      ['bind'],
    );
    expect(rows).toHaveLength(3);
    expect(rows).toEqual(bound);
  });

  it('in one round trip: fails the attempt on a statement error, takes a due retry over, survives DISCARD ALL, takes a started attempt over', async () => {
    const one = recordingPool(t.url, 'inboxkit-statement-once', 1);
    const oneDb = new Kysely<DB>({ dialect: new PostgresDialect({ pool: one.pool }) }).withSchema(t.schema);
    onTestFinished(() => oneDb.destroy());
    let broken = true;
    const consumer = idempotentConsumer<Payload, Transaction<DB>>({
      name: 'once-fail',
      store: new PostgresInboxStore({ db: oneDb, schema: t.schema }),
      backoff: { initialDelayMs: 0, jitter: 'none' },
      // The failing statements here break a CHECK (23514), which is permanent by default; these tests retry it,
      // as an application that means to deploy a fix would, through the documented override.
      isRetriable: () => true,
      handler: statementHandler<Payload, Transaction<DB>>((m) =>
        oneDb
          .insertInto('orders')
          .values({ consumer: 'once-fail', order_id: m.payload.order, total: broken ? m.payload.total : Math.abs(m.payload.total) } as never),
      ),
    });
    const calls = (): string[] => one.sent.filter((q) => q.startsWith('SELECT message_id, answer FROM pg_temp.inboxkit_once('));
    expect(await consumer.handle(message('w', { order: 'w', total: 1 }))).toMatchObject({ status: 'processed' });
    one.sent.length = 0;
    // total -1 breaks the CHECK inside the function: the claim goes with the effect; the usual path meets the same
    // error on the handler's transaction and records the failure.
    expect(await consumer.handle(message('m2', { order: 'o2', total: -1 }))).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1 });
    expect(calls()).toHaveLength(1);
    const inbox = `"${t.schema}".inbox`;
    expect((await t.pool.query(`SELECT status, attempts FROM ${inbox} WHERE consumer = 'once-fail' AND message_id = 'm2'`)).rows).toEqual([
      { status: 'failed', attempts: 1 },
    ]);
    expect(await rowsOf('once-fail')).toEqual([{ order_id: 'w', total: 1, note: null, raw: null }]);
    // Fixed: the claim in the function takes the due retry over and runs the statement, one round trip.
    broken = false;
    one.sent.length = 0;
    expect(await consumer.handle(message('m2', { order: 'o2', total: -1 }))).toMatchObject({ status: 'processed', attempt: 2 });
    expect(one.sent).toHaveLength(1);
    expect(calls()).toHaveLength(1);
    expect(await consumer.handle(message('m2', { order: 'o2', total: -1 }))).toMatchObject({ status: 'duplicate' });
    // The session loses its prepared statements and temporary functions: the next delivery's call fails, having
    // run nothing, sets them up again and calls again; the one after is one round trip again.
    await oneDb.executeQuery(CompiledQuery.raw('DISCARD ALL'));
    expect(await consumer.handle(message('m3', { order: 'o3', total: 3 }))).toMatchObject({ status: 'processed' });
    one.sent.length = 0;
    expect(await consumer.handle(message('m4', { order: 'o4', total: 4 }))).toMatchObject({ status: 'processed' });
    expect(one.sent).toHaveLength(1);
    expect(calls()).toHaveLength(1);
    // An attempt recorded as started (Kafka does so per fetched batch): the claim takes the row over, still one
    // round trip; a second delivery of it is a duplicate.
    await attemptLedgerOf(consumer)!.recordAttemptsStarted([message('m5', { order: 'o5', total: 5 })]);
    one.sent.length = 0;
    expect(await consumer.handle(message('m5', { order: 'o5', total: 5 }))).toMatchObject({ status: 'processed', attempt: 1 });
    expect(one.sent).toHaveLength(1);
    expect(calls()).toHaveLength(1);
    await attemptLedgerOf(consumer)!.recordAttemptsStarted([message('m6', { order: 'o6', total: -6 })]);
    // A statement failing after a take-over: recorded with the attempt the claim took (the third here).
    broken = true;
    expect(await consumer.handle(message('m6', { order: 'o6', total: -6 }))).toMatchObject({ status: 'retry', attempt: 1 });
    expect(await consumer.handle(message('m6', { order: 'o6', total: -6 }))).toMatchObject({ status: 'retry', attempt: 2 });
    await attemptLedgerOf(consumer)!.recordAttemptsStarted([message('m6', { order: 'o6', total: -6 })]);
    expect(await consumer.handle(message('m6', { order: 'o6', total: -6 }))).toMatchObject({ status: 'retry', attempt: 3 });
    expect((await t.pool.query(`SELECT status, attempts FROM ${inbox} WHERE consumer = 'once-fail' AND message_id = 'm6'`)).rows).toEqual([
      { status: 'failed', attempts: 3 },
    ]);
    broken = false;
    expect(await consumer.handle(message('m6', { order: 'o6', total: -6 }))).toMatchObject({ status: 'processed', attempt: 4 });
    expect(await consumer.handle(message('m5', { order: 'o5', total: 5 }))).toMatchObject({ status: 'duplicate' });
    expect((await rowsOf('once-fail')).map((r) => `${String(r['order_id'])}:${String(r['total'])}`)).toEqual([
      'o2:1',
      'o3:3',
      'o4:4',
      'o5:5',
      'o6:6',
      'w:1',
    ]);
  });

  it("turns the functions off by itself, saying so, where sessions may not create temporary objects; the statements run on the handler's transaction", async () => {
    // A database without the TEMPORARY privilege for PUBLIC, and a role that is not a superuser.
    const suffix = randomBytes(4).toString('hex');
    const database = `inboxkit_notemp_${suffix}`;
    const role = `inboxkit_notemp_${suffix}`;
    await t.pool.query(`CREATE DATABASE ${database}`);
    await t.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}'`);
    // The pool connects on first use, so it exists before the clean-up hook that ends it.
    const url = new URL(t.url);
    url.username = role;
    url.password = role;
    url.pathname = `/${database}`;
    const one = recordingPool(url.toString(), 'inboxkit-statement-notemp', 1);
    // pg-pool resolves end() before its clients' sockets close: the FORCE drop below may still terminate one,
    // which the pool reports as an 'error' event.
    one.pool.on('error', () => {});
    const roleDb = new Kysely<DB>({ dialect: new PostgresDialect({ pool: one.pool }) });
    // One hook, in this order: the pool ends before its database goes (a backend terminated under a client the
    // pool still holds is an 'error' event nobody listens to).
    onTestFinished(async () => {
      await roleDb.destroy();
      await t.pool.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await t.pool.query(`DROP ROLE IF EXISTS ${role}`);
    });
    await t.pool.query(`REVOKE TEMPORARY ON DATABASE ${database} FROM PUBLIC`);
    await t.pool.query(`GRANT CREATE ON DATABASE ${database} TO ${role}`);
    await migrateInbox(roleDb);
    // (Postgres 15 lets nobody but the owner create in `public`: the orders go in the role's inbox schema.)
    await roleDb.executeQuery(CompiledQuery.raw('CREATE TABLE inboxkit.orders (order_id text PRIMARY KEY, total int NOT NULL)'));
    const { logger, warnings } = recordingLogger();
    const consumer = idempotentConsumer<Payload, Transaction<DB>>({
      name: 'notemp',
      store: new PostgresInboxStore({ db: roleDb, logger }),
      handler: statementHandler<Payload, Transaction<DB>>((m) =>
        roleDb.withSchema('inboxkit').insertInto('orders').values({ order_id: m.payload.order, total: m.payload.total }),
      ),
    });
    for (const n of [1, 2, 3]) {
      expect(await consumer.handle(message(`n${n}`, { order: `n${n}`, total: n }))).toMatchObject({ status: 'processed' });
    }
    expect(await consumer.handle(message('n1', { order: 'n1', total: 1 }))).toMatchObject({ status: 'duplicate' });
    // Postgres refused the function once, with a warning; it was not asked again, and the statements went through
    // the handler's transaction.
    expect(one.sent.filter((q) => q.startsWith('CREATE FUNCTION'))).toHaveLength(1);
    expect(warnings).toEqual([{ obj: expect.objectContaining({ reason: 'temporary-functions-refused' }), msg: expect.stringMatching(/one-round-trip/) }]);
    expect(one.sent.some((q) => q.startsWith('SELECT message_id, answer FROM pg_temp.') || q.startsWith('PREPARE '))).toBe(false);
    expect(one.sent.filter((q) => /^insert into "inboxkit"\."orders"/.test(q))).toHaveLength(3);
    const { rows } = await roleDb.executeQuery<{ order_id: string; total: number }>(CompiledQuery.raw('SELECT order_id, total FROM inboxkit.orders ORDER BY order_id'));
    expect(rows).toEqual([
      { order_id: 'n1', total: 1 },
      { order_id: 'n2', total: 2 },
      { order_id: 'n3', total: 3 },
    ]);
  });

  it.each([
    ['in one round trip through the batch function', true],
    ["on the batch's transaction, without temporary functions", false],
  ] as const)("sends a batch's statements %s, isolates a failing one, takes a due retry over", async (_, temporaryFunctions) => {
    // One connection, so that the statement prepared after the first batch is there for the second.
    const one = recordingPool(t.url, 'inboxkit-statement-batch', 1);
    const oneDb = new Kysely<DB>({ dialect: new PostgresDialect({ pool: one.pool }) }).withSchema(t.schema);
    const sent = one.sent;
    const name = `batch-${String(temporaryFunctions)}`;
    let fixed = false;
    const consumer = idempotentConsumer<Payload, Transaction<DB>>({
      name,
      store: new PostgresInboxStore({ db: oneDb, schema: t.schema, temporaryFunctions }),
      backoff: { initialDelayMs: 0, jitter: 'none' },
      // The failing statements here break a CHECK (23514), which is permanent by default; these tests retry it,
      // as an application that means to deploy a fix would, through the documented override.
      isRetriable: () => true,
      handler: statementHandler<Payload, Transaction<DB>>((m) =>
        oneDb
          .insertInto('orders')
          .values({ consumer: name, order_id: m.payload.order, total: fixed ? Math.abs(m.payload.total) : m.payload.total } as never),
      ),
    });
    onTestFinished(() => oneDb.destroy());
    const claims = (): string[] => sent.filter((q) => q.includes('"inbox_claim'));
    const first = await consumer.handleBatch(['x1', 'x2', 'x1', 'x3'].map((id) => message(id, { order: id, total: 2 })));
    expect(first.map((o) => o.status)).toEqual(['processed', 'processed', 'duplicate', 'processed']);
    // The repeated x1 was answered by the batch's own claim, not claimed again in a transaction of its own.
    expect(claims()).toHaveLength(1);
    sent.length = 0;
    const second = await consumer.handleBatch(['y1', 'x2', 'y2', 'y3'].map((id) => message(id, { order: id, total: 3 })));
    expect(second.map((o) => `${o.status}:${'reason' in o ? o.reason : ''}`)).toEqual([
      'processed:',
      'dead-letter:payload-mismatch',
      'processed:',
      'processed:',
    ]);
    if (temporaryFunctions) {
      // x2's statement travels too (its owner is named) but does not run: the function did not take x2.
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatch(
        new RegExp(
          `^SELECT message_id, answer FROM pg_temp\\.inboxkit_once\\('SELECT v\\.id AS message_id, "[^"]+"\\."inbox_claim"\\(''${name}''::text, v\\.id, .*unnest\\(ARRAY\\[''y1'',''x2'',''y2'',''y3''\\]::text\\[\\], .*` +
            `ARRAY\\['EXECUTE inboxkit_fx_[0-9a-f]{16} \\(''${name}'', ''y1'', ''3''\\)',.*\\]::text\\[\\], ARRAY\\['y1','x2','y2','y3'\\]::text\\[\\]\\)$`,
          's',
        ),
      );
    } else {
      // BEGIN with the batch claim, each claimed message's statement, COMMIT.
      expect(sent).toHaveLength(5);
      expect(sent[0]).toMatch(/^BEGIN;\nSELECT v\.id AS message_id, "[^"]+"\."inbox_claim"/);
      expect(sent.slice(1, 4).map((q) => /^insert into/.test(q))).toEqual([true, true, true]);
      expect(sent[4]).toBe('COMMIT');
    }
    // z2 breaks the CHECK: the one-round-trip pass commits nothing, the isolated pass applies the others once.
    sent.length = 0;
    const third = await consumer.handleBatch(['z1', 'z2', 'z3'].map((id) => message(id, { order: id, total: id === 'z2' ? -1 : 4 })));
    expect(third.map((o) => o.status)).toEqual(['processed', 'retry', 'processed']);
    expect(sent.some((q) => q.includes('SAVEPOINT'))).toBe(true);
    // Fixed: z2's retry is due, and the batch claim takes it over beside the new w1.
    fixed = true;
    const fourth = await consumer.handleBatch(['w1', 'z2'].map((id) => message(id, { order: id, total: id === 'z2' ? -1 : 5 })));
    expect(fourth.map((o) => `${o.status}:${o.status === 'processed' ? o.attempt : ''}`)).toEqual(['processed:1', 'processed:2']);
    expect((await rowsOf(name)).map((r) => `${String(r['order_id'])}:${String(r['total'])}`)).toEqual([
      'w1:5',
      'x1:2',
      'x2:2',
      'x3:2',
      'y1:3',
      'y2:3',
      'y3:3',
      'z1:4',
      'z2:1',
      'z3:4',
    ]);
  });
});
