// Issue 22, item 1: every failure path counts toward maxAttempts and ends in the DLQ, even when what the failure
// would record is refused by Postgres (a lone surrogate, a NUL, a date out of range), when `isRetriable` or the
// logger throws, or when the handler's own transaction keeps losing its connection. A genuine outage of the
// store is the one exception: it burns no attempt and dead-letters nothing. Each case runs on real Postgres.

import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import type { IdempotentConsumerConfig, Logger } from '../src/consumer-types.js';
import { RetryableError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import type { Outcome } from '../src/outcome.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import {
  countEffects,
  insertEffect,
  openTestDatabase,
  type TestDatabase,
  type TestDB,
  type TestTx,
} from './support/postgres.js';

const message = (
  id: string,
  body = '{"v":"x\\ud800y"}',
  extra: Partial<InboundMessage> = {},
): InboundMessage => ({
  id,
  body,
  headers: {},
  source: { transport: 'memory' },
  ...extra,
});

/** Delivers `m` as a broker without a delivery count would, until the outcome is final (at most `max` times). */
async function untilSettled(
  deliver: () => Promise<Outcome>,
  max = 12,
): Promise<{ last: Outcome; deliveries: number }> {
  for (let i = 1; i <= max; i++) {
    const last = await deliver();
    if (last.status !== 'retry') return { last, deliveries: i };
  }
  throw new Error(`still retrying after ${max} deliveries`);
}

describe('a failure that cannot be recorded as thrown still counts and ends in the DLQ', () => {
  let t: TestDatabase;
  let admin: pg.Pool;
  beforeAll(async () => {
    t = await openTestDatabase('unrecordable');
    admin = new pg.Pool({ connectionString: t.url, max: 2 });
    admin.on('error', () => {});
  });
  afterAll(async () => {
    await admin?.end();
    await t?.close();
  });

  function consumerWith(
    name: string,
    overrides: Partial<IdempotentConsumerConfig<{ v: string }, TestTx>> = {},
  ) {
    let runs = 0;
    const consumer = idempotentConsumer<{ v: string }, TestTx>({
      name,
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      maxAttempts: 3,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, { tx }) => {
        runs++;
        await insertEffect(tx, t.schema, name, m.id);
        throw new Error('bad ' + m.payload.v);
      },
      ...overrides,
    });
    return { consumer, runs: () => runs };
  }

  async function rowOf(name: string, id: string) {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    return (await store.findRows(name, [id]))[0];
  }

  it.each([
    ['a lone high surrogate', 'x\\ud800y'],
    ['a lone low surrogate', 'x\\udc00y'],
    ['a NUL', 'x\\u0000y'],
    ['a surrogate pair cut by the 2,000-character clip', `${'a'.repeat(1_994)}\\ud83d\\ude80zz`],
  ])(
    'handle(): a handler error holding %s runs maxAttempts times, then dead-letters with its row',
    async (label, v) => {
      const name = `error-text-${label.replaceAll(/\W/g, '-')}`;
      const { consumer, runs } = consumerWith(name);
      const { last } = await untilSettled(() => consumer.handle(message('m1', `{"v":"${v}"}`)));
      expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
      expect(runs()).toBe(3);
      expect(await rowOf(name, 'm1')).toMatchObject({
        status: 'dead_lettered',
        attempts: 3,
        deadLetterReason: 'max-attempts',
      });
      expect(await countEffects(t.db, t.schema, name)).toBe(0);
    },
  );

  it('handle(): the recorded error keeps its text, with the unrecordable characters replaced by U+FFFD', async () => {
    const name = 'error-text-kept';
    const { consumer } = consumerWith(name, { maxAttempts: 1 });
    const outcome = await consumer.handle(message('m1'));
    expect(outcome).toMatchObject({ status: 'dead-letter', error: { message: 'bad x\uFFFDy' } });
    expect((await rowOf(name, 'm1'))?.lastError).toMatchObject({ name: 'Error', message: 'bad x\uFFFDy' });
  });

  it('handle(): an error whose name, code and stack hold lone surrogates is recorded', async () => {
    const name = 'error-fields';
    const { consumer, runs } = consumerWith(name, {
      handler: async () => {
        runs2++;
        const e = new Error('plain');
        e.name = 'Odd\uD800Error';
        e.stack = `Odd\uD800Error: plain\n    at \uDFFF (file.js:1:1)`;
        throw Object.assign(e, { code: 'C\uD800' });
      },
    });
    let runs2 = 0;
    const { last } = await untilSettled(() => consumer.handle(message('m1', '{"v":"ok"}')));
    expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect(runs2 + runs()).toBe(3);
    expect((await rowOf(name, 'm1'))?.lastError).toMatchObject({ name: 'Odd\uFFFDError', code: 'C\uFFFD' });
  });

  it('handleBatch(): a batch with one such message commits the others and dead-letters it after maxAttempts', async () => {
    const name = 'error-text-batch';
    // A failing batch runs its handlers twice per delivery (`batchSavepoints: 'on-failure'`): count attempts.
    const attempts: number[] = [];
    const consumer = idempotentConsumer<{ v: string }, TestTx>({
      name,
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      maxAttempts: 3,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, { tx, attempt }) => {
        await insertEffect(tx, t.schema, name, m.id);
        if (m.id === 'bad') {
          attempts.push(attempt);
          throw new Error('bad ' + m.payload.v);
        }
      },
    });
    const batch = [message('a', '{"v":"a"}'), message('bad'), message('c', '{"v":"c"}')];
    let outcomes = await consumer.handleBatch(batch);
    for (let i = 0; i < 12 && outcomes[1]!.status === 'retry'; i++)
      outcomes = await consumer.handleBatch(batch);
    expect(outcomes[1]).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect([...new Set(attempts)]).toEqual([1, 2, 3]);
    expect(await countEffects(t.db, t.schema, name, 'a')).toBe(1);
    expect(await countEffects(t.db, t.schema, name, 'c')).toBe(1);
    expect(await countEffects(t.db, t.schema, name, 'bad')).toBe(0);
  });

  it('handle(): an isRetriable that throws counts the attempt; the message ends in the DLQ after maxAttempts', async () => {
    const name = 'is-retriable-throws';
    const { consumer, runs } = consumerWith(name, {
      isRetriable: () => {
        throw new Error('classifier bug');
      },
    });
    const { last } = await untilSettled(() => consumer.handle(message('m1', '{"v":"ok"}')));
    expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect(runs()).toBe(3);
  });

  it('handle(): an error whose message getter throws is recorded and counted', async () => {
    const name = 'message-getter-throws';
    const { consumer, runs } = consumerWith(name, {
      handler: async () => {
        runs3++;
        const e = new Error('x');
        Object.defineProperty(e, 'message', {
          get() {
            throw new Error('getter');
          },
        });
        throw e;
      },
    });
    let runs3 = 0;
    const { last } = await untilSettled(() => consumer.handle(message('m1', '{"v":"ok"}')));
    expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect(runs3 + runs()).toBe(3);
  });

  it('handle(): a logger that throws does not stop the attempt being counted', async () => {
    const name = 'logger-throws';
    const throwing = (): never => {
      throw new Error('logger down');
    };
    const logger: Logger = { debug: throwing, info: throwing, warn: throwing, error: throwing };
    const { consumer, runs } = consumerWith(name, { logger });
    const { last } = await untilSettled(() => consumer.handle(message('m1', '{"v":"ok"}')));
    expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect(runs()).toBe(3);
  });

  it('handle(): a RetryableError asking for an absurd delay is counted and ends in the DLQ', async () => {
    const name = 'absurd-delay';
    let runs = 0;
    const consumer = idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      maxAttempts: 2,
      handler: async () => {
        runs++;
        throw new RetryableError('later', { delayMs: 1e20 });
      },
    });
    const first = await consumer.handle(message('m1', '{}'));
    expect(first).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1 });
    expect((first as { delayMs: number }).delayMs).toBeLessThanOrEqual(2_147_483_647);
    // The row waits for the delay; a redelivery is told to come back later, not run.
    expect(await consumer.handle(message('m1', '{}'))).toMatchObject({
      status: 'retry',
      reason: 'handler-error',
    });
    expect(runs).toBe(1);
    expect(await rowOf(name, 'm1')).toMatchObject({ status: 'failed', attempts: 1 });
  });

  it.each(['process', 'dead-letter'] as const)(
    'handle(): a message timestamp Postgres cannot store (latePolicy %s) is not an endless retry',
    async (latePolicy) => {
      const name = `ancient-timestamp-${latePolicy}`;
      let runs = 0;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        latePolicy,
        handler: async (m, { tx }) => {
          runs++;
          await insertEffect(tx, t.schema, name, m.id);
        },
      });
      const ancient = new Date(-8_000_000_000_000_000); // year -251,540: a valid Date, out of timestamptz range
      const { last } = await untilSettled(() => consumer.handle(message('m1', '{}', { timestamp: ancient })));
      expect(last.status).not.toBe('retry');
      expect(runs).toBeLessThanOrEqual(1);
      expect(await countEffects(t.db, t.schema, name)).toBe(runs);
    },
  );

  describe('a store that refuses a write for its content (a trigger raising a data exception)', () => {
    // Postgres refusals nothing in the message can avoid any more, provoked by triggers keyed by message id and
    // status only: `reject-claim-*` refuses every write of its inbox row, `reject-failure-*` every failed or
    // dead-lettered row, `reject-full-*` a failure whose recorded error is not the minimal record's (the error
    // is written to the details table, beside the lean inbox row).
    beforeAll(async () => {
      await admin.query(`CREATE FUNCTION "${t.schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.message_id LIKE 'reject-claim-%'
     OR (NEW.message_id LIKE 'reject-failure-%' AND NEW.status IN ('failed', 'dead_lettered')) THEN
    RAISE EXCEPTION 'refused by test trigger' USING ERRCODE = '22023';
  END IF;
  RETURN NEW;
END $$`);
      await admin.query(`CREATE FUNCTION "${t.schema}".refuse_error() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.message_id LIKE 'reject-full-%' AND NEW.last_error IS NOT NULL
     AND NEW.last_error->>'name' IS DISTINCT FROM 'UnrecordableFailure' THEN
    RAISE EXCEPTION 'refused by test trigger' USING ERRCODE = '22023';
  END IF;
  RETURN NEW;
END $$`);
      await admin.query(
        `CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON "${t.schema}".inbox FOR EACH ROW EXECUTE FUNCTION "${t.schema}".refuse()`,
      );
      await admin.query(
        `CREATE TRIGGER refuse_error BEFORE INSERT OR UPDATE ON "${t.schema}".inbox_details FOR EACH ROW EXECUTE FUNCTION "${t.schema}".refuse_error()`,
      );
    });

    it('a claim refused for its content is dead-lettered as unrecordable, the handler never run', async () => {
      const name = 'refused-claim';
      const { consumer, runs } = consumerWith(name);
      expect(await consumer.handle(message('reject-claim-1', '{"v":"ok"}'))).toMatchObject({
        status: 'dead-letter',
        reason: 'unrecordable',
        attempts: 0,
      });
      expect(
        await consumer.handleBatch([
          message('reject-claim-2', '{"v":"ok"}'),
          message('reject-claim-3', '{"v":"ok"}'),
        ]),
      ).toMatchObject([
        { status: 'dead-letter', reason: 'unrecordable' },
        { status: 'dead-letter', reason: 'unrecordable' },
      ]);
      expect(runs()).toBe(0);
    });

    it('a failure record refused for its content is recorded in minimal form: the attempt counts, the DLQ after maxAttempts', async () => {
      const name = 'refused-full-record';
      const { consumer, runs } = consumerWith(name);
      const { last } = await untilSettled(() => consumer.handle(message('reject-full-1', '{"v":"ok"}')));
      expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
      expect(runs()).toBe(3);
      expect(await rowOf(name, 'reject-full-1')).toMatchObject({
        status: 'dead_lettered',
        attempts: 3,
        lastError: {
          name: 'UnrecordableFailure',
          message: expect.stringMatching(/SQLSTATE 22023.*Error/) as unknown,
        },
      });
    });

    it('a failure that cannot be recorded in any form is dead-lettered after its one attempt, its effect rolled back', async () => {
      const name = 'refused-every-record';
      const { consumer, runs } = consumerWith(name);
      expect(await consumer.handle(message('reject-failure-1', '{"v":"ok"}'))).toMatchObject({
        status: 'dead-letter',
        reason: 'unrecordable',
        attempts: 1,
      });
      expect(runs()).toBe(1);
      expect(await countEffects(t.db, t.schema, name)).toBe(0);
    });
  });

  describe('a handler whose own transaction keeps losing its connection', () => {
    it('handle(): a terminated backend counts an attempt each time; the message ends in the DLQ after maxAttempts', async () => {
      const name = 'always-terminated';
      let runs = 0;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        maxAttempts: 3,
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          runs++;
          await insertEffect(tx, t.schema, name, m.id);
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
          await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
          await sql`SELECT 1`.execute(tx);
        },
      });
      const { last } = await untilSettled(() => consumer.handle(message('m1', '{}')));
      expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
      expect(runs).toBe(3);
      expect(await countEffects(t.db, t.schema, name)).toBe(0);
    });

    it('handle(): an idle-in-transaction timeout that ends every attempt counts each; the DLQ after maxAttempts', async () => {
      const name = 'always-idle-timeout';
      let runs = 0;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        maxAttempts: 3,
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          runs++;
          await sql`SET LOCAL idle_in_transaction_session_timeout = '50ms'`.execute(tx);
          await insertEffect(tx, t.schema, name, m.id);
          await new Promise((r) => setTimeout(r, 400));
        },
      });
      const { last } = await untilSettled(() => consumer.handle(message('m1', '{}')));
      expect(last).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
      expect(runs).toBe(3);
      expect(await countEffects(t.db, t.schema, name)).toBe(0);
    });

    it('handleBatch(): only the message whose handler lost the connection is charged; the others are applied once', async () => {
      const name = 'batch-terminated';
      // The batch's run of 'b' is not charged (which message failed cannot be told in one transaction); its run
      // alone right after is. So 'b' runs twice per delivery, and sees each attempt number twice.
      const attempts: number[] = [];
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        maxAttempts: 3,
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx, attempt }) => {
          await insertEffect(tx, t.schema, name, m.id);
          if (m.id !== 'b') return;
          attempts.push(attempt);
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
          await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
          await sql`SELECT 1`.execute(tx);
        },
      });
      const batch = [message('a', '{}'), message('b', '{}'), message('c', '{}')];
      // The whole batch is redelivered each time, as a broker without a delivery count would.
      let outcomes = await consumer.handleBatch(batch);
      for (let i = 0; i < 12 && outcomes[1]!.status === 'retry'; i++)
        outcomes = await consumer.handleBatch(batch);
      expect(outcomes[1]).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
      expect(attempts).toEqual([1, 1, 2, 2, 3, 3]);
      expect(await countEffects(t.db, t.schema, name, 'a')).toBe(1);
      expect(await countEffects(t.db, t.schema, name, 'c')).toBe(1);
      expect(await countEffects(t.db, t.schema, name, 'b')).toBe(0);
      const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
      expect(
        (await store.findRows(name, ['a', 'c'])).map((r) => [r.messageId, r.status, r.attempts]),
      ).toEqual([
        ['a', 'completed', 1],
        ['c', 'completed', 1],
      ]);
    });

    it('an outage of Postgres during the handler burns no attempt: the redelivery after it runs as attempt 1', async () => {
      const name = 'outage-no-attempt';
      const url = new URL(t.url);
      const proxy = await tcpProxy({ host: url.hostname, port: Number(url.port) });
      await proxy.open();
      url.port = String(proxy.port);
      const pool = new pg.Pool({ connectionString: url.toString(), max: 2, connectionTimeoutMillis: 2_000 });
      pool.on('error', () => {});
      const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
      let cut = false;
      try {
        const consumer = idempotentConsumer<unknown, TestTx>({
          name,
          store: new PostgresInboxStore({ db, schema: t.schema }),
          maxAttempts: 1,
          backoff: { initialDelayMs: 0, maxDelayMs: 0 },
          handler: async (m, { tx }) => {
            await insertEffect(tx, t.schema, name, m.id);
            if (cut) return;
            cut = true;
            await proxy.close();
            await sql`SELECT 1`.execute(tx);
          },
        });
        expect(await consumer.handle(message('m1', '{}'))).toMatchObject({
          status: 'retry',
          reason: 'store-unavailable',
        });
        expect(await consumer.handle(message('m1', '{}'))).toMatchObject({
          status: 'retry',
          reason: 'store-unavailable',
        });
        await proxy.open();
        expect(await consumer.handle(message('m1', '{}'))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await countEffects(t.db, t.schema, name)).toBe(1);
      } finally {
        await db.destroy();
        await proxy.close();
      }
    });
  });
});
