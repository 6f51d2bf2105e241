// Issue 22, item 7: a Postgres data error raised by the handler fails the same way on every attempt, so it is
// dead-lettered at once (permanent-error) instead of burning every retry; the violations another writer can
// resolve (unique, foreign key) stay retriable; isRetriable overrides. Real Postgres errors, raised by real
// statements.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

const message = (id: string): InboundMessage => ({
  id,
  body: '{}',
  headers: {},
  source: { transport: 'memory' },
});

describe('a handler raising a Postgres data error', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('data_errors');
    await t.pool.query(
      `CREATE TABLE "${t.schema}".things (id int PRIMARY KEY, name text NOT NULL, size int CHECK (size >= 0), code varchar(3))`,
    );
    await t.pool.query(`INSERT INTO "${t.schema}".things VALUES (1, 'one', 1, 'a')`);
  });
  afterAll(async () => {
    await t?.close();
  });

  const statements: [string, string, string][] = [
    ['22P02', 'invalid text representation', `SELECT 'x'::int`],
    ['22003', 'numeric value out of range', `SELECT 2147483647::int + 1`],
    ['22012', 'division by zero', `SELECT 1 / 0`],
    ['22001', 'value too long', `INSERT INTO "{s}".things VALUES (2, 'two', 1, 'abcd')`],
    ['22008', 'date out of range', `SELECT '10000-01-01'::date + interval '1 day' * 1e9`],
    ['23502', 'not-null violation', `INSERT INTO "{s}".things VALUES (3, NULL, 1, 'a')`],
    ['23514', 'check violation', `INSERT INTO "{s}".things VALUES (4, 'four', -1, 'a')`],
  ];

  it.each(statements)(
    '%s (%s) is dead-lettered as permanent-error after one attempt',
    async (code, _label, statement) => {
      const name = `data-${code}`;
      let runs = 0;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        handler: async (_m, { tx }) => {
          runs++;
          await sql.raw(statement.replaceAll('{s}', t.schema)).execute(tx);
        },
      });
      const outcome = await consumer.handle(message('m1'));
      expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'permanent-error', attempts: 1 });
      expect((outcome as { error?: { code?: string } }).error?.code).toBe(code);
      expect(runs).toBe(1);
    },
  );

  it.each([['23505', 'unique violation', `INSERT INTO "{s}".things VALUES (1, 'again', 1, 'a')`]])(
    '%s (%s) stays retriable: another writer may have made the next attempt succeed',
    async (code, _label, statement) => {
      const name = `retriable-${code}`;
      const consumer = idempotentConsumer<unknown, TestTx>({
        name,
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        handler: async (_m, { tx }) => {
          await sql.raw(statement.replaceAll('{s}', t.schema)).execute(tx);
        },
      });
      expect(await consumer.handle(message('m1'))).toMatchObject({
        status: 'retry',
        reason: 'handler-error',
        attempt: 1,
        error: { code },
      });
    },
  );

  it('isRetriable overrides: a data error it calls retriable is retried until maxAttempts', async () => {
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'data-override',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      maxAttempts: 2,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      isRetriable: () => true,
      handler: async (_m, { tx }) => {
        await sql`SELECT 'x'::int`.execute(tx);
      },
    });
    expect(await consumer.handle(message('m1'))).toMatchObject({
      status: 'retry',
      reason: 'handler-error',
      attempt: 1,
    });
    expect(await consumer.handle(message('m1'))).toMatchObject({
      status: 'dead-letter',
      reason: 'max-attempts',
      attempts: 2,
    });
  });
});
