// enqueue(): the row commits and rolls back with the caller's transaction, ids are UUIDv7 unless given, and
// deterministic ids are stable.

import { ConfigurationError } from '@inboxkit/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deterministicMessageId, enqueue, outbox, uuidv7 } from '../src/index.js';
import { openOutboxDb, type OutboxTestDb } from './support.js';

describe('enqueue', () => {
  let t: OutboxTestDb;
  let opts: { schema: string };
  beforeAll(async () => {
    t = await openOutboxDb('outbox_enqueue');
    opts = { schema: t.schema.schema };
  });
  afterAll(async () => {
    await t?.close();
  });

  async function ids(): Promise<string[]> {
    const { rows } = await sql<{ id: string }>`SELECT id FROM ${sql.raw(`"${opts.schema}"."outbox"`)} ORDER BY seq`.execute(t.db);
    return rows.map((r) => r.id);
  }

  it('commits the row with the transaction', async () => {
    const id = await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'orders', key: 'k', body: 'hello' }, opts));
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await ids()).toContain(id);
  });

  it('leaves nothing behind when the transaction rolls back', async () => {
    let id = '';
    await expect(
      t.db.transaction().execute(async (tx) => {
        id = await outbox(tx, opts).enqueue({ destination: 'orders', body: new Uint8Array([1, 2, 3]) });
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(id).not.toBe('');
    expect(await ids()).not.toContain(id);
  });

  it('keeps the first row when a deterministic id is enqueued again', async () => {
    const id = deterministicMessageId('orders-consumer', 'incoming-1', 'created');
    expect(deterministicMessageId('orders-consumer', 'incoming-1', 'created')).toBe(id);
    expect(deterministicMessageId('orders-consumer', 'incoming-1', 'shipped')).not.toBe(id);
    await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'd', body: 'a', id }, opts));
    await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'd', body: 'b', id }, opts));
    expect((await ids()).filter((x) => x === id)).toHaveLength(1);
  });

  it('makes strictly increasing UUIDv7 ids within a millisecond', () => {
    const now = Date.now() + 60_000;
    const a = uuidv7(now);
    const b = uuidv7(now);
    expect(b > a).toBe(true);
  });

  it('refuses a message without destination or with a non-UUID id', async () => {
    await expect(t.db.transaction().execute((tx) => enqueue(tx, { destination: '', body: 'x' }, opts))).rejects.toThrow(ConfigurationError);
    await expect(t.db.transaction().execute((tx) => enqueue(tx, { destination: 'd', body: 'x', id: 'abc' }, opts))).rejects.toThrow(/UUID/);
  });

  it('notifies the relays at commit unless notify is false (the row is written either way)', async () => {
    const client = await t.schema.pool.connect();
    try {
      const heard: string[] = [];
      let first: () => void = () => undefined;
      const arrived = new Promise<void>((resolve) => (first = resolve));
      client.on('notification', (n) => {
        heard.push(n.channel);
        first();
      });
      await client.query(`LISTEN "${opts.schema}.outbox"`);
      const quiet = await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'quiet', body: 'x' }, { ...opts, notify: false }));
      const loud = await t.db.transaction().execute((tx) => outbox(tx, opts).enqueue({ destination: 'loud', body: 'x' }));
      await arrived;
      // Both committed before this round trip, so any notification of theirs is delivered before its answer.
      await client.query('SELECT 1');
      expect(heard).toEqual([`${opts.schema}.outbox`]);
      expect(await ids()).toEqual(expect.arrayContaining([quiet, loud]));
      await client.query('UNLISTEN *');
    } finally {
      client.release();
    }
    expect(() => outbox(t.db, { ...opts, notify: 'no' as never })).toThrow(ConfigurationError);
  });
});
