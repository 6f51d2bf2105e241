// A replay, a 409 and a 422 are answered from the row without writing it: the claim of a known key is not an
// upsert that locks the row (a lock takes a transaction id, and its commit waits for a WAL flush like a write).
// The row's xmax stays 0 when nobody locked or updated it since it was written.

import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeys } from '../src/index.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;

beforeAll(async () => {
  t = await openHttpTestDatabase('http_replay_ro');
});

afterAll(async () => {
  await t?.close();
});

describe('answers from a known key', () => {
  it('replays, refuses another body and answers 409 without locking or updating the row', async () => {
    const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => 'p' });
    const begin = (key: string, body: unknown) =>
      keys.begin({
        method: 'POST',
        route: '/ro',
        headers: { 'idempotency-key': key },
        body,
        native: undefined,
      });
    const xmax = async (key: string) => {
      const r = await sql<{ xmax: string }>`
        SELECT xmax::text AS xmax FROM ${sql.raw(`"${t.schema}".idempotency_key`)} WHERE idempotency_key = ${key}`.execute(
        t.db,
      );
      return r.rows[0]!.xmax;
    };

    const done = randomUUID();
    const first = await begin(done, { a: 1 });
    if (first.kind !== 'proceed') throw new Error(first.kind);
    await first.complete({ status: 201, body: { ok: true } });
    expect(await xmax(done)).toBe('0');
    for (let i = 0; i < 3; i++) expect((await begin(done, { a: 1 })).kind).toBe('replay');
    expect((await begin(done, { a: 2 })).kind).toBe('mismatch');
    expect(await xmax(done)).toBe('0');

    const busy = randomUUID();
    expect((await begin(busy, {})).kind).toBe('proceed');
    expect(await xmax(busy)).toBe('0');
    expect((await begin(busy, {})).kind).toBe('conflict');
    expect(await xmax(busy)).toBe('0');
  });
});
