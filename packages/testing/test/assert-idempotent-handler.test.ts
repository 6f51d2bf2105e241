// assertIdempotentHandler passes correct handlers on any store and fails, with a readable report, on the
// classic mistakes: an effect written outside the transaction, an id that changes per delivery, no inbox.

import { randomUUID } from 'node:crypto';

import { PGlite } from '@electric-sql/pglite';
import { PermanentError, idempotentConsumer } from '@inboxkit/core';
import type { IdempotentConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import type { InMemoryTransaction } from '@inboxkit/core/memory';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, sql } from 'kysely';
import type { Transaction } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import { describe, expect, it } from 'vitest';

import { IDEMPOTENCY_SCENARIOS, IdempotencyAssertionError, assertIdempotentHandler } from '../src/index.js';
import type { IdempotencyReport } from '../src/index.js';
import { fakeConsumer } from './support/fake-consumer.js';

const message = { id: 'order-1', body: JSON.stringify({ orderId: 'o-1', total: 5 }) };

function memory(handler?: (id: string, tx: InMemoryTransaction) => void) {
  const store = new InMemoryInboxStore();
  const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
    name: 'orders',
    store,
    backoff: { initialDelayMs: 10, maxDelayMs: 40, jitter: 'none' },
    handler: async (m, { tx }) => (handler ? handler(m.id, tx) : tx.stage(m.id)),
  });
  return { store, consumer };
}

async function failure(run: Promise<IdempotencyReport>): Promise<IdempotencyAssertionError> {
  const error = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(IdempotencyAssertionError);
  return error as IdempotencyAssertionError;
}

describe('assertIdempotentHandler', () => {
  it('passes a handler that writes through the transaction, in every scenario', async () => {
    const { store, consumer } = memory();
    const report = await assertIdempotentHandler(consumer, message, {
      countEffects: ({ id }) => store.countEffects('orders', id),
    });
    expect(report.passed).toBe(true);
    expect(report.scenarios.map((s) => [s.scenario, s.effects])).toEqual(
      IDEMPOTENCY_SCENARIOS.map((s) => [s, 1]),
    );
    const parallel = report.scenarios.find((s) => s.scenario === 'parallel')!;
    expect(parallel.deliveries).toBe(10);
    expect(parallel.outcomes.filter((o) => o.includes('processed'))).toHaveLength(1);
    const crash = report.scenarios.find((s) => s.scenario === 'crash-before-commit')!;
    expect(crash.outcomes[0]).toMatch(/^crash after the handler returned/);
    expect(crash.outcomes[1]).toMatch(/processed \(attempt 2\)/);
  });

  it('passes on Postgres (PGlite) with the effect in a table', async () => {
    type DB = { charges: { message_id: string } };
    const db = new Kysely<DB>({ dialect: new PGliteDialect(new PGlite()) });
    try {
      await migrateInbox(db, { schema: 'inboxkit' });
      await sql`CREATE TABLE charges (message_id text NOT NULL)`.execute(db);
      const consumer = idempotentConsumer<unknown, Transaction<DB>>({
        name: 'charges',
        store: new PostgresInboxStore({ db, schema: 'inboxkit', pipelining: 'off' }),
        handler: async (m, { tx }) => {
          await tx.insertInto('charges').values({ message_id: m.id }).execute();
        },
      });
      const report = await assertIdempotentHandler(consumer, message, {
        parallel: 5,
        countEffects: async ({ id }) => {
          const rows = await db
            .selectFrom('charges')
            .select('message_id')
            .where('message_id', '=', id)
            .execute();
          return rows.length;
        },
      });
      expect(report.passed).toBe(true);
    } finally {
      await db.destroy();
    }
  });

  it('fails a handler that writes its effect outside the transaction: the crash before the commit repeats it', async () => {
    const outside: string[] = [];
    const { consumer } = memory((id) => void outside.push(id));
    const error = await failure(
      assertIdempotentHandler(consumer, message, {
        countEffects: ({ id }) => outside.filter((x) => x === id).length,
      }),
    );
    const byScenario = Object.fromEntries(error.report.scenarios.map((s) => [s.scenario, s.passed]));
    expect(byScenario).toEqual({
      sequential: true,
      parallel: true,
      'crash-before-commit': false,
      'crash-before-ack': true,
    });
    expect(error.message).toContain('broke exactly-once in 1 of 4 scenarios');
    expect(error.message).toContain(
      '✗ crash-before-commit: a crash after the handler, before the commit, then a redelivery',
    );
    expect(error.message).toContain('problem: expected exactly 1 effect, counted 2');
    expect(error.message).toContain('effects counted: 0 before, 2 after (2 new, expected 1)');
    expect(error.message).toContain('hint: an effect written outside context.tx');
    expect(error.actual).toMatchObject({ 'crash-before-commit': 2 });
    expect(error.expected).toMatchObject({ 'crash-before-commit': 1 });
  });

  it('fails a consumer whose message id changes on every delivery (a broker coordinate taken as the id)', async () => {
    const { store, consumer } = memory();
    const error = await failure(
      assertIdempotentHandler(consumer, () => ({ id: randomUUID(), body: message.body }), {
        parallel: 4,
        countEffects: () => store.countEffects('orders'),
      }),
    );
    const effects = Object.fromEntries(error.report.scenarios.map((s) => [s.scenario, s.effects]));
    expect(effects).toEqual({ sequential: 2, parallel: 4, 'crash-before-commit': 1, 'crash-before-ack': 2 });
    expect(error.message).toContain('broke exactly-once in 3 of 4 scenarios');
  });

  it('fails a consumer without an inbox that applies every delivery', async () => {
    const noInbox: IdempotentConsumer = {
      ...fakeConsumer(),
      handle: async (m) => ({ status: 'processed', messageId: m.id!, attempt: 1, durationMs: 0 }),
    };
    const applied: string[] = [];
    const counting: IdempotentConsumer = {
      ...noInbox,
      handle: async (m) => {
        applied.push(m.id!);
        return noInbox.handle(m);
      },
    };
    const error = await failure(
      assertIdempotentHandler(counting, message, {
        scenarios: ['sequential', 'parallel', 'crash-before-ack'],
        countEffects: ({ id }) => applied.filter((x) => x === id).length,
      }),
    );
    expect(error.report.scenarios.map((s) => s.effects)).toEqual([2, 10, 2]);
  });

  it('fails, showing the outcome, when the handler never applies the message', async () => {
    const { consumer } = memory(() => {
      throw new PermanentError('rejected by rule 7');
    });
    const error = await failure(
      assertIdempotentHandler(consumer, message, { scenarios: ['sequential'], countEffects: () => 0 }),
    );
    expect(error.message).toContain('expected exactly 1 effect, counted 0');
    expect(error.message).toMatch(
      /dead-letter \(permanent-error, 1 attempts, PermanentError: rejected by rule 7\)/,
    );
  });

  it('calls reset() before each scenario, for effects keyed by the payload', async () => {
    const orders = new Map<string, number>();
    let resets = 0;
    const { consumer } = memory((_, tx) =>
      tx.onCommit(() => orders.set('o-1', (orders.get('o-1') ?? 0) + 1)),
    );
    const report = await assertIdempotentHandler(consumer, message, {
      reset: () => {
        resets += 1;
        orders.clear();
      },
      countEffects: () => orders.get('o-1') ?? 0,
    });
    expect(report.passed).toBe(true);
    expect(resets).toBe(4);
  });

  it('redelivers retries after their delay until the outcome is final', async () => {
    let calls = 0;
    const { store, consumer } = memory((id, tx) => {
      calls += 1;
      if (calls === 1) throw new Error('flaky downstream');
      tx.stage(id);
    });
    const report = await assertIdempotentHandler(consumer, message, {
      scenarios: ['sequential'],
      countEffects: ({ id }) => store.countEffects('orders', id),
    });
    expect(report.scenarios[0]!.outcomes).toEqual([
      expect.stringMatching(/retry \(attempt 1, handler-error/),
      expect.stringMatching(/processed \(attempt 2\)/),
      expect.stringMatching(/duplicate \(completed\)/),
    ]);
  });
});
