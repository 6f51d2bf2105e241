// Pruning: expired keys go, in batches; live keys and keys in flight under a live lease stay.

import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeys, pruneIdempotencyKeys } from '../src/index.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;

beforeAll(async () => {
  t = await openHttpTestDatabase('http_prune');
});

afterAll(async () => {
  await t?.close();
});

describe('pruneIdempotencyKeys', () => {
  it('deletes expired keys in batches and keeps live ones and those under a live lease', async () => {
    const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => 'p' });
    const begin = async (key: string) => {
      const decision = await keys.begin({
        method: 'POST',
        route: '/x',
        headers: { 'idempotency-key': key },
        body: {},
        native: undefined,
      });
      if (decision.kind !== 'proceed') throw new Error(decision.kind);
      return decision;
    };
    const expired = Array.from({ length: 5 }, () => randomUUID());
    for (const key of expired) await (await begin(key)).complete({ status: 200 });
    const live = randomUUID();
    await (await begin(live)).complete({ status: 200 });
    const inFlight = randomUUID();
    await begin(inFlight);
    const table = sql.raw(`"${t.schema}".idempotency_key`);
    await sql`UPDATE ${table} SET expires_at = now() - interval '1 second' WHERE idempotency_key <> ${live}`.execute(
      t.db,
    );

    expect(await pruneIdempotencyKeys(t.db, { schema: t.schema, batchSize: 2 })).toEqual({ deleted: 5 });
    const left = await sql<{
      idempotency_key: string;
    }>`SELECT idempotency_key FROM ${table} ORDER BY 1`.execute(t.db);
    expect(left.rows.map((r) => r.idempotency_key).sort()).toEqual([live, inFlight].sort());
    await expect(pruneIdempotencyKeys(t.db, { schema: t.schema, batchSize: 0 })).rejects.toThrow(/batchSize/);
  });
});
