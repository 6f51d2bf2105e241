// The Idempotency-Key middleware over each data layer (`idempotencyKeys({ seam })`): the handler's writes and the
// stored response commit together in the library's own transaction; a retry of the key is a replay and runs
// nothing; a 5xx rolls the writes back and releases the key; a phase's result is recorded with its writes.

import {
  idempotencyKeys,
  migrateIdempotencyKeys,
  runIdempotent,
  type IdempotentRequest,
} from '@inboxkit/http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTERS, openAdapter, type AdapterName, type AdapterUnderTest } from './fixtures/adapters.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('http');
  await migrateIdempotencyKeys(t.db, { schema: t.schema });
});
afterAll(async () => {
  await t?.close();
});

const request = (key: string, body: unknown): IdempotentRequest<undefined> => ({
  method: 'POST',
  route: '/payments',
  headers: { 'idempotency-key': key },
  body,
  native: undefined,
});

describe.each(Object.keys(ADAPTERS) as AdapterName[])('Idempotency-Key over the %s adapter', (name) => {
  let adapter: AdapterUnderTest<object>;
  beforeAll(async () => {
    adapter = await openAdapter(name, t);
  });
  afterAll(async () => {
    await adapter?.close();
  });

  it('commits the writes with the stored response and replays it without running again', async () => {
    const keys = idempotencyKeys({ seam: adapter.seam, schema: t.schema, principal: () => 'tenant-1' });
    const consumer = `http-${name}`;
    let runs = 0;
    const pay = () =>
      runIdempotent(keys, request(`${name}-k1`, { amount: 5 }), (context) =>
        context.transaction(async (tx) => {
          runs++;
          await adapter.applyEffect(tx, consumer, 'k1');
          return { status: 201, body: { paid: 5 } };
        }),
      );
    const first = await pay();
    expect(first.status).toBe(201);
    const again = await pay();
    expect(again).toMatchObject({ status: 201, headers: { 'idempotent-replayed': 'true' } });
    expect(JSON.parse(again.body.toString())).toEqual({ paid: 5 });
    expect(runs).toBe(1);
    expect(await countEffects(t.pool, t.schema, consumer, 'k1')).toBe(1);
  });

  it('rolls back the writes of a 5xx and releases the key; a phase keeps its result for the retry', async () => {
    const keys = idempotencyKeys({ seam: adapter.seam, schema: t.schema, principal: () => 'tenant-1' });
    const consumer = `http5xx-${name}`;
    let phases = 0;
    let fail = true;
    const pay = () =>
      runIdempotent(keys, request(`${name}-k2`, { amount: 7 }), async (context) => {
        const reserved = await context.phase('reserve', async (tx) => {
          phases++;
          await adapter.applyEffect(tx, consumer, 'reserve');
          return { reservation: 'r-1' };
        });
        return context.transaction(async (tx) => {
          await adapter.applyEffect(tx, consumer, 'charge');
          return fail ? { status: 503, body: { retry: true } } : { status: 201, body: reserved };
        });
      });
    expect((await pay()).status).toBe(503);
    expect(await countEffects(t.pool, t.schema, consumer, 'charge')).toBe(0);
    fail = false;
    const second = await pay();
    expect(second.status).toBe(201);
    expect(JSON.parse(second.body.toString())).toEqual({ reservation: 'r-1' });
    expect(phases).toBe(1);
    expect(await countEffects(t.pool, t.schema, consumer, 'reserve')).toBe(1);
    expect(await countEffects(t.pool, t.schema, consumer, 'charge')).toBe(1);
  });
});
