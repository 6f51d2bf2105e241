// The version guard on real Postgres: a late older event, or a redelivery of the same version, changes nothing
// and says so — directly, and through idempotentConsumer() with reordered deliveries under new message ids.

import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import { applyIfNewer } from '../../src/patterns/index.js';
import { PostgresInboxStore } from '../../src/postgres/index.js';
import { openTestDatabase, type TestDatabase, type TestTx } from '../support/postgres.js';

describe('applyIfNewer', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('version_guard');
    await sql
      .raw(
        `CREATE TABLE "${t.schema}".invoices (id text PRIMARY KEY, status text NOT NULL, version bigint, updated_at timestamptz)`,
      )
      .execute(t.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const table = () => ({ schema: t.schema, name: 'invoices' });
  const row = async (id: string) =>
    (
      await sql<{
        status: string;
        version: string | null;
      }>`SELECT status, version FROM ${sql.table(`${t.schema}.invoices`)} WHERE id = ${id}`.execute(t.db)
    ).rows[0];

  it('keeps the newer state when a late older event arrives after it', async () => {
    const paid = await applyIfNewer(t.db, {
      table: table(),
      key: { id: 'in_1' },
      version: { column: 'version', value: 3 },
      values: { status: 'paid' },
    });
    expect(paid).toEqual({ applied: true, inserted: true });
    const late = await applyIfNewer(t.db, {
      table: table(),
      key: { id: 'in_1' },
      version: { column: 'version', value: 2 },
      values: { status: 'open' },
    });
    expect(late).toEqual({ applied: false, reason: 'stale' });
    expect(await row('in_1')).toEqual({ status: 'paid', version: '3' });
  });

  it('treats a redelivery of the same version as stale, and applies a newer one as an update', async () => {
    await applyIfNewer(t.db, {
      table: table(),
      key: { id: 'in_2' },
      version: { column: 'version', value: 1 },
      values: { status: 'open' },
    });
    expect(
      await applyIfNewer(t.db, {
        table: table(),
        key: { id: 'in_2' },
        version: { column: 'version', value: 1 },
        values: { status: 'void' },
      }),
    ).toEqual({
      applied: false,
      reason: 'stale',
    });
    expect(
      await applyIfNewer(t.db, {
        table: table(),
        key: { id: 'in_2' },
        version: { column: 'version', value: 2 },
        values: { status: 'paid' },
      }),
    ).toEqual({
      applied: true,
      inserted: false,
    });
    expect(await row('in_2')).toEqual({ status: 'paid', version: '2' });
  });

  it('compares event times, and overwrites a row whose version is NULL', async () => {
    await sql.raw(`INSERT INTO "${t.schema}".invoices (id, status) VALUES ('in_3', 'draft')`).execute(t.db);
    const at = (iso: string) => ({ column: 'updated_at', value: new Date(iso) });
    expect(
      (
        await applyIfNewer(t.db, {
          table: table(),
          key: { id: 'in_3' },
          version: at('2026-01-02T00:00:00Z'),
          values: { status: 'open' },
        })
      ).applied,
    ).toBe(true);
    expect(
      (
        await applyIfNewer(t.db, {
          table: table(),
          key: { id: 'in_3' },
          version: at('2026-01-01T00:00:00Z'),
          values: { status: 'draft' },
        })
      ).applied,
    ).toBe(false);
    expect((await row('in_3'))?.status).toBe('open');
  });

  it('updates only, with insert: false, and tells a missing row from a stale event', async () => {
    const options = { table: table(), insert: false, values: { status: 'paid' } } as const;
    expect(
      await applyIfNewer(t.db, {
        ...options,
        key: { id: 'in_none' },
        version: { column: 'version', value: 9 },
      }),
    ).toEqual({ applied: false, reason: 'missing' });
    await applyIfNewer(t.db, {
      table: table(),
      key: { id: 'in_4' },
      version: { column: 'version', value: 5 },
      values: { status: 'open' },
    });
    expect(
      await applyIfNewer(t.db, { ...options, key: { id: 'in_4' }, version: { column: 'version', value: 4 } }),
    ).toEqual({ applied: false, reason: 'stale' });
    expect(
      await applyIfNewer(t.db, { ...options, key: { id: 'in_4' }, version: { column: 'version', value: 6 } }),
    ).toEqual({ applied: true, inserted: false });
    expect(await row('in_4')).toEqual({ status: 'paid', version: '6' });
  });

  it('runs on a node-postgres client inside BEGIN', async () => {
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      const r = await applyIfNewer(client, {
        table: table(),
        key: { id: 'in_pg' },
        version: { column: 'version', value: 1 },
        values: { status: 'open' },
      });
      await client.query('ROLLBACK');
      expect(r).toEqual({ applied: true, inserted: true });
      expect(await row('in_pg')).toBeUndefined();
    } finally {
      await client.end();
    }
  });

  it('ends reordered events through the consumer in the newest state, each event counted once', async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const stale: string[] = [];
    const consumer = idempotentConsumer<{ invoice: string; version: number; status: string }, TestTx>({
      name: 'invoice-events',
      store,
      handler: async (m, { tx }) => {
        const result = await applyIfNewer(tx, {
          table: { schema: t.schema, name: 'invoices' },
          key: { id: m.payload.invoice },
          version: { column: 'version', value: m.payload.version },
          values: { status: m.payload.status },
        });
        if (!result.applied) stale.push(m.id);
      },
    });
    const event = (id: string, version: number, status: string) => ({
      id,
      body: JSON.stringify({ invoice: 'in_c', version, status }),
      headers: {},
      source: { transport: 'memory' as const },
    });
    // The newest event first, then the older ones late, then a redelivery of the newest.
    const outcomes = [];
    for (const e of [
      event('evt-3', 3, 'paid'),
      event('evt-1', 1, 'draft'),
      event('evt-2', 2, 'open'),
      event('evt-3', 3, 'paid'),
    ]) {
      outcomes.push((await consumer.handle(e)).status);
    }
    expect(outcomes).toEqual(['processed', 'processed', 'processed', 'duplicate']);
    expect(stale).toEqual(['evt-1', 'evt-2']);
    expect(await row('in_c')).toEqual({ status: 'paid', version: '3' });
  });
});
