// Compare-and-set on real Postgres: a write conditional on the version read. Sequentially (applied, conflict
// with the actual version, missing), and under concurrency: 20 writers that read the same version, queued on the
// row's lock at once — exactly one applies; and 20 read-modify-write increments retried on conflict lose none.

import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareAndSet } from '../../src/patterns/index.js';
import { openTestDatabase, type TestDatabase } from '../support/postgres.js';

describe('compareAndSet', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('compare_and_set', 28);
    await sql
      .raw(
        `CREATE TABLE "${t.schema}".accounts (id text PRIMARY KEY, balance bigint NOT NULL, owner text, version bigint)`,
      )
      .execute(t.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const table = () => ({ schema: t.schema, name: 'accounts' });
  const create = (id: string, balance: number, version: number | null = 0) =>
    sql`INSERT INTO ${sql.table(`${t.schema}.accounts`)} (id, balance, version) VALUES (${id}, ${balance}, ${version})`.execute(
      t.db,
    );
  const row = async (id: string) =>
    (
      await sql<{
        balance: string;
        owner: string | null;
        version: string | null;
      }>`SELECT balance, owner, version FROM ${sql.table(`${t.schema}.accounts`)} WHERE id = ${id}`.execute(
        t.db,
      )
    ).rows[0];

  it('writes and increments the version when it is the expected one, and refuses a stale expectation', async () => {
    await create('a1', 100);
    const set = (expected: number | bigint, balance: number) =>
      compareAndSet(t.db, {
        table: table(),
        key: { id: 'a1' },
        version: { column: 'version', expected },
        values: { balance },
      });
    expect(await set(0, 90)).toEqual({ applied: true, version: 1n });
    expect(await set(0, 80)).toEqual({ applied: false, reason: 'conflict', actual: 1n });
    expect(await set(1n, 70)).toEqual({ applied: true, version: 2n });
    expect(await row('a1')).toEqual({ balance: '70', owner: null, version: '2' });
  });

  it('answers missing for no row, conflict with null for a NULL version, and refuses a fractional expectation', async () => {
    expect(
      await compareAndSet(t.db, {
        table: table(),
        key: { id: 'none' },
        version: { column: 'version', expected: 0 },
        values: { balance: 1 },
      }),
    ).toEqual({ applied: false, reason: 'missing', actual: undefined });
    await create('a2', 5, null);
    expect(
      await compareAndSet(t.db, {
        table: table(),
        key: { id: 'a2' },
        version: { column: 'version', expected: 0 },
        values: { balance: 1 },
      }),
    ).toEqual({ applied: false, reason: 'conflict', actual: null });
    await expect(
      compareAndSet(t.db, {
        table: table(),
        key: { id: 'a2' },
        version: { column: 'version', expected: 0.5 },
        values: { balance: 1 },
      }),
    ).rejects.toThrow(/version.expected must be a whole number or a bigint, got 0.5/);
    expect(await row('a2')).toEqual({ balance: '5', owner: null, version: null });
  });

  it('runs on a node-postgres client inside BEGIN', async () => {
    await create('a3', 1);
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      const r = await compareAndSet(client, {
        table: table(),
        key: { id: 'a3' },
        version: { column: 'version', expected: 0 },
        values: { owner: 'x' },
      });
      await client.query('ROLLBACK');
      expect(r).toEqual({ applied: true, version: 1n });
      expect(await row('a3')).toEqual({ balance: '1', owner: null, version: '0' });
    } finally {
      await client.end();
    }
  });

  it('applies exactly one of 20 concurrent writers that read the same version', async () => {
    await create('race', 0);
    const holder = new pg.Client({ connectionString: t.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${t.schema}".accounts WHERE id = 'race' FOR UPDATE`);
    const writers = Array.from({ length: 20 }, (_, i) => `writer-${i}`);
    let settled = 0;
    const runs = writers.map((owner) =>
      t.db
        .transaction()
        .execute((tx) =>
          compareAndSet(tx, {
            table: table(),
            key: { id: 'race' },
            version: { column: 'version', expected: 0 },
            values: { owner },
          }),
        )
        .then((result) => ({ owner, result }))
        .finally(() => settled++),
    );
    try {
      // Every writer queued on the holder's lock (or, if the write were not conditional, finished).
      for (;;) {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE cardinality(pg_blocking_pids(pid)) > 0 AND strpos(query, ${t.schema}) > 0`.execute(t.db);
        if ((rows[0]?.n ?? 0) + settled >= writers.length) break;
        await sleep(5);
      }
    } finally {
      await holder.query('COMMIT');
      await holder.end();
    }
    const outcomes = await Promise.all(runs);
    const winners = outcomes.filter((o) => o.result.applied);
    expect(winners).toHaveLength(1);
    expect(winners[0]!.result).toEqual({ applied: true, version: 1n });
    for (const o of outcomes)
      if (!o.result.applied) expect(o.result).toEqual({ applied: false, reason: 'conflict', actual: 1n });
    expect(await row('race')).toEqual({ balance: '0', owner: winners[0]!.owner, version: '1' });
  });

  it('loses no increment of 20 concurrent read-modify-write loops that retry on conflict', async () => {
    await create('counter', 0);
    const increment = async (): Promise<void> => {
      for (;;) {
        const current = (await row('counter'))!;
        const r = await compareAndSet(t.db, {
          table: table(),
          key: { id: 'counter' },
          version: { column: 'version', expected: BigInt(current.version!) },
          values: { balance: Number(current.balance) + 1 },
        });
        if (r.applied) return;
      }
    };
    await Promise.all(Array.from({ length: 20 }, increment));
    expect(await row('counter')).toEqual({ balance: '20', owner: null, version: '20' });
  });
});
