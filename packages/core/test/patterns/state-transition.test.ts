// The legal-transition guard on real Postgres: a payment moves only along its declared machine. Sequentially
// (the legal path, an illegal step refused with both states named, a redelivery, a missing row), through the
// consumer (an illegal event dead-lettered, nothing written), and under concurrency: many transitions of one row
// queued on its lock at once, of which exactly the legal ones apply, in a legal order.

import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError, PermanentError } from '../../src/errors.js';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import {
  defineStateMachine,
  IllegalTransitionError,
  transitionState,
  type TransitionStateResult,
} from '../../src/patterns/index.js';
import { PostgresInboxStore } from '../../src/postgres/index.js';
import { openTestDatabase, type TestDatabase, type TestTx } from '../support/postgres.js';

const payment = defineStateMachine('payment', {
  pending: ['authorized', 'failed'],
  authorized: ['captured', 'voided'],
  captured: ['refunded'],
  failed: [],
  voided: [],
  refunded: [],
});

describe('transitionState', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('state_transition', 32);
    await sql
      .raw(`CREATE TABLE "${t.schema}".payments (id text PRIMARY KEY, status text, note text)`)
      .execute(t.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const table = () => ({ schema: t.schema, name: 'payments' });
  const create = (id: string, status: string | null) =>
    sql`INSERT INTO ${sql.table(`${t.schema}.payments`)} (id, status) VALUES (${id}, ${status})`.execute(
      t.db,
    );
  const row = async (id: string) =>
    (
      await sql<{
        status: string | null;
        note: string | null;
      }>`SELECT status, note FROM ${sql.table(`${t.schema}.payments`)} WHERE id = ${id}`.execute(t.db)
    ).rows[0];
  const move = (id: string, to: string, values?: Record<string, unknown>) =>
    transitionState(t.db, {
      table: table(),
      key: { id },
      column: 'status',
      machine: payment,
      to,
      ...(values ? { values } : {}),
    });

  it('follows the legal path, writing values with each step, and reports the state it left', async () => {
    await create('p1', 'pending');
    expect(await move('p1', 'authorized', { note: 'auth' })).toEqual({ applied: true, from: 'pending' });
    expect(await move('p1', 'captured', { note: 'cap' })).toEqual({ applied: true, from: 'authorized' });
    expect(await move('p1', 'refunded')).toEqual({ applied: true, from: 'captured' });
    expect(await row('p1')).toEqual({ status: 'refunded', note: 'cap' });
  });

  it('refuses authorized after captured with a PermanentError naming both states, and writes nothing', async () => {
    await create('p2', 'captured');
    const error = await move('p2', 'authorized', { note: 'late' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IllegalTransitionError);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({
      code: 'ILLEGAL_TRANSITION',
      retriable: false,
      from: 'captured',
      to: 'authorized',
    });
    expect((error as Error).message).toBe(
      `illegal payment transition of ${t.schema}.payments(id=p2): from "captured" to "authorized" ("captured" allows "refunded")`,
    );
    expect(await row('p2')).toEqual({ status: 'captured', note: null });
    // A terminal state says so.
    await create('p3', 'failed');
    await expect(move('p3', 'authorized')).rejects.toThrow(
      /from "failed" to "authorized" \("failed" allows nothing: it is terminal\)/,
    );
  });

  it('answers already for a redelivered transition, missing for no row, and refuses undeclared states', async () => {
    await create('p4', 'authorized');
    expect(await move('p4', 'authorized')).toEqual({ applied: false, reason: 'already' });
    expect(await move('nope', 'authorized')).toEqual({ applied: false, reason: 'missing' });
    await expect(move('p4', 'settled')).rejects.toThrow(
      /cannot move to "settled", which is not a state of payment/,
    );
    await create('p5', 'on-hold');
    await expect(move('p5', 'captured')).rejects.toThrow(
      /the row holds "on-hold", which is not a state of payment/,
    );
    await create('p6', null);
    await expect(move('p6', 'authorized')).rejects.toBeInstanceOf(IllegalTransitionError);
    expect(await row('p4')).toEqual({ status: 'authorized', note: null });
  });

  it('runs on a node-postgres client inside BEGIN', async () => {
    await create('p7', 'pending');
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      const r = await transitionState(client, {
        table: table(),
        key: { id: 'p7' },
        column: 'status',
        machine: payment,
        to: 'failed',
      });
      await client.query('ROLLBACK');
      expect(r).toEqual({ applied: true, from: 'pending' });
      expect((await row('p7'))?.status).toBe('pending');
    } finally {
      await client.end();
    }
  });

  it('dead-letters an illegal event through the consumer, and rolls back what the handler wrote before it', async () => {
    await create('p8', 'captured');
    const consumer = idempotentConsumer<{ payment: string; to: string }, TestTx>({
      name: 'payment-events',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      handler: async (m, { tx }) => {
        await sql`UPDATE ${sql.table(`${t.schema}.payments`)} SET note = 'touched' WHERE id = ${m.payload.payment}`.execute(
          tx,
        );
        await transitionState(tx, {
          table: table(),
          key: { id: m.payload.payment },
          column: 'status',
          machine: payment,
          to: m.payload.to,
        });
      },
    });
    const event = (id: string, to: string) => ({
      id,
      body: JSON.stringify({ payment: 'p8', to }),
      headers: {},
      source: { transport: 'memory' as const },
    });
    const late = await consumer.handle(event('evt-auth', 'authorized'));
    expect(late).toMatchObject({ status: 'dead-letter', reason: 'permanent-error' });
    expect(late.status === 'dead-letter' ? late.error?.message : '').toMatch(
      /from "captured" to "authorized"/,
    );
    expect(await row('p8')).toEqual({ status: 'captured', note: null });
    expect(await consumer.handle(event('evt-refund', 'refunded'))).toMatchObject({ status: 'processed' });
    expect(await row('p8')).toEqual({ status: 'refunded', note: 'touched' });
  });

  it('applies exactly the legal ones of 24 concurrent transitions of one row, in a legal order', async () => {
    await create('race', 'pending');
    const targets = ['authorized', 'captured', 'refunded', 'failed', 'voided', 'pending'].flatMap((s) => [
      s,
      s,
      s,
      s,
    ]);
    // Hold the row, so that every transition is queued on its lock before any runs.
    const holder = new pg.Client({ connectionString: t.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${t.schema}".payments WHERE id = 'race' FOR UPDATE`);
    let settled = 0;
    const runs = targets.map((to) =>
      t.db
        .transaction()
        .execute((tx) =>
          transitionState(tx, {
            table: table(),
            key: { id: 'race' },
            column: 'status',
            machine: payment,
            to,
          }),
        )
        .then(
          (result): { to: string; result: TransitionStateResult } => ({ to, result }),
          (error: unknown) => ({ to, error }),
        )
        .finally(() => settled++),
    );
    try {
      // Wait for the state this test needs: all 24 waiting on the holder's lock (or, if the guard did not lock,
      // finished without waiting).
      for (;;) {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE cardinality(pg_blocking_pids(pid)) > 0 AND strpos(query, ${t.schema}) > 0`.execute(t.db);
        if ((rows[0]?.n ?? 0) + settled >= targets.length) break;
        await sleep(5);
      }
    } finally {
      await holder.query('COMMIT');
      await holder.end();
    }
    const outcomes = await Promise.all(runs);

    const applied = outcomes.flatMap((o) =>
      'result' in o && o.result.applied ? [{ from: o.result.from, to: o.to }] : [],
    );
    // The applied transitions form one legal walk from pending: each leaves the state the previous one entered.
    let state = 'pending';
    const walk: string[] = [];
    for (let step = 0; step < applied.length; step++) {
      const next = applied.filter((a) => a.from === state);
      expect(next, `one transition out of ${state}`).toHaveLength(1);
      expect(payment.allows(state, next[0]!.to)).toBe(true);
      state = next[0]!.to;
      walk.push(state);
    }
    expect(applied.length).toBeGreaterThan(0);
    expect(payment.next(state), 'the walk ends in a terminal state').toEqual([]);
    expect((await row('race'))?.status).toBe(state);
    // Everything else was refused: a redelivery of a state the row held, or an illegal transition naming both.
    for (const o of outcomes) {
      if ('error' in o) {
        expect(o.error).toBeInstanceOf(IllegalTransitionError);
        const e = o.error as IllegalTransitionError;
        expect(e.to).toBe(o.to);
        expect(e.message).toContain(`from "${String(e.from)}" to "${o.to}"`);
      } else if (!o.result.applied) {
        expect(o.result.reason).toBe('already');
        expect(['pending', ...walk]).toContain(o.to);
      }
    }
    expect(outcomes.filter((o) => 'error' in o).length + outcomes.filter((o) => 'result' in o).length).toBe(
      targets.length,
    );
  });
});

describe('defineStateMachine', () => {
  it('refuses a transition to an undeclared state, a non-array entry and an empty machine at declaration', () => {
    expect(() => defineStateMachine('m', { a: ['b'] } as never)).toThrow(ConfigurationError);
    expect(() => defineStateMachine('m', { a: ['b'] } as never)).toThrow(
      /"a" moves to "b", which is not a declared state \(declared: a\)/,
    );
    expect(() => defineStateMachine('m', { a: 'b' } as never)).toThrow(/"a" must map to an array of states/);
    expect(() => defineStateMachine('m', {})).toThrow(/at least one state/);
    expect(() => defineStateMachine('', { a: [] })).toThrow(/name must be 1-100 characters/);
  });

  it('answers allows and next, and allows a self-transition only when listed', () => {
    const m = defineStateMachine('loop', { on: ['on', 'off'], off: ['on'] });
    expect(m.states).toEqual(['on', 'off']);
    expect(m.allows('on', 'on')).toBe(true);
    expect(m.allows('off', 'off')).toBe(false);
    expect(m.allows('nope', 'on')).toBe(false);
    expect(m.next('off')).toEqual(['on']);
  });
});
