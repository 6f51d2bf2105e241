// The HTTP fast path's entries belong to one key table and are checked when read back: on real Redis shared by
// two real Postgres key tables (two schemas), app B never replays app A's stored response; and an entry that
// Postgres would never replay (a header outside the replay allow-list such as set-cookie, a status no response
// can have, a body that is not base64) is not served: the replay comes from Postgres.

import { randomUUID } from 'node:crypto';
import { redisFastPath } from '@inboxkit/core/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, keysUnder as redisKeysUnder, type TestRedis } from '../../../test/support/redis.js';
import { idempotencyKeys } from '../src/index.js';
import {
  openHttpTestDatabase,
  type HttpTestDB,
  type HttpTestDatabase,
} from './support/http-test-database.js';
import { eventually } from '../../../test/support/eventually.js';

let a: HttpTestDatabase;
let b: HttpTestDatabase;
let redis: TestRedis;
beforeAll(async () => {
  a = await openHttpTestDatabase('http_fp_authority_a');
  b = await openHttpTestDatabase('http_fp_authority_b');
  redis = await connectRedis();
});
afterAll(async () => {
  await redis?.quit();
  await a?.close();
  await b?.close();
});

/** Every key under `prefix` (the test's own). */
const keysUnder = (prefix: string): Promise<string[]> => redisKeysUnder(redis, prefix);

/** An app's keys on `t`'s table, with the fast path under `keyPrefix`, every request from principal `alice`. */
const appOn = (t: HttpTestDatabase, keyPrefix: string, secret?: string) =>
  idempotencyKeys<HttpTestDB>({
    db: t.db,
    schema: t.schema,
    fastPath: redisFastPath({ client: redis, keyPrefix, ...(secret === undefined ? {} : { secret }) }),
    principal: () => 'alice',
  });

/** POST /orders with `key` through `keys`; a request that proceeds returns `tenant`'s data. */
async function send(keys: ReturnType<typeof appOn>, t: HttpTestDatabase, key: string, tenant: string) {
  const decision = await keys.begin({
    method: 'POST',
    route: '/orders',
    headers: { 'idempotency-key': key },
    body: { item: 'book' },
    native: undefined,
  });
  if (decision.kind === 'unkeyed') throw new Error('unkeyed');
  if (decision.kind !== 'proceed')
    return { kind: decision.kind, source: decision.source, response: decision.response };
  const response = await decision.transaction(async (tx) => {
    await tx
      .insertInto('effects')
      .values({ label: `${tenant}:${key}` })
      .execute();
    return {
      status: 201,
      headers: { 'content-type': 'application/json', 'set-cookie': 'session=1' },
      body: { tenant },
    };
  });
  return { kind: 'proceed', source: undefined, response };
}

describe('HTTP fast-path entries belong to their key table', () => {
  it("never replays app A's stored response to app B's client when both use one Redis", async () => {
    const prefix = `test:http-fp-authority:${randomUUID()}:`;
    const [appA, appB] = [appOn(a, prefix), appOn(b, prefix)];
    const key = randomUUID();
    expect((await send(appA, a, key, 'tenant-a')).kind).toBe('proceed');
    await eventually(async () => (await keysUnder(prefix)).length === 1);
    // The same principal, route, key and body on B: B has no row, so B's handler runs, with B's data.
    const onB = await send(appB, b, key, 'tenant-b');
    expect(onB.kind).toBe('proceed');
    expect(onB.response.body.toString()).toContain('tenant-b');
    expect(await b.effects(`tenant-b:${key}`)).toBe(1);
    // Each app's retries are answered from Redis, each with its own response.
    await eventually(async () => (await keysUnder(prefix)).length === 2);
    const retryA = await send(appA, a, key, 'tenant-a');
    const retryB = await send(appB, b, key, 'tenant-b');
    expect(retryA).toMatchObject({ kind: 'replay', source: 'fast-path' });
    expect(retryB).toMatchObject({ kind: 'replay', source: 'fast-path' });
    expect(retryA.response.body.toString()).toContain('tenant-a');
    expect(retryB.response.body.toString()).toContain('tenant-b');
  });
});

describe('what the HTTP fast path reads back', () => {
  const tampered: [string, (entry: Record<string, unknown>) => void][] = [
    [
      'a set-cookie header (outside the replay allow-list)',
      (e) => void ((e['h'] as Record<string, string>)['set-cookie'] = 'session=stolen'),
    ],
    ['a status of 1000', (e) => void (e['s'] = 1000)],
    ['a status of 200.5', (e) => void (e['s'] = 200.5)],
    ['a 5xx status (never stored, so never replayed)', (e) => void (e['s'] = 503)],
    [
      'a header value with a line break',
      (e) => void ((e['h'] as Record<string, string>)['content-type'] = 'text/html\r\nx-injected: 1'),
    ],
    ['a body that is not base64', (e) => void (e['b'] = 'not base64!')],
  ];
  it.each(tampered)(
    'does not serve an entry with %s: the replay comes from Postgres, as stored',
    async (_what, tamper) => {
      const prefix = `test:http-fp-readback:${randomUUID()}:`;
      const app = appOn(a, prefix);
      const key = randomUUID();
      await send(app, a, key, 'tenant-a');
      await eventually(async () => (await keysUnder(prefix)).length === 1);
      const [cacheKey] = await keysUnder(prefix);
      // The genuine entry (its request fingerprint is right), tampered with in one field.
      const entry = JSON.parse((await redis.get(cacheKey!))!) as Record<string, unknown>;
      tamper(entry);
      await redis.sendCommand(['SET', cacheKey!, JSON.stringify(entry), 'PX', '60000']);
      const retry = await send(app, a, key, 'tenant-a');
      expect(retry).toMatchObject({ kind: 'replay', source: undefined });
      expect(retry.response.status).toBe(201);
      expect(retry.response.headers).not.toHaveProperty('set-cookie');
      expect(retry.response.headers['content-type']).toBe('application/json');
      expect(retry.response.body.toString()).toContain('tenant-a');
      expect(await a.effects(`tenant-a:${key}`)).toBe(1);
    },
  );

  it('with a secret, does not serve a response forged under the key with the right request fingerprint', async () => {
    const prefix = `test:http-fp-signed:${randomUUID()}:`;
    const app = appOn(a, prefix, 'the application secret, 32 bytes+');
    const key = randomUUID();
    await send(app, a, key, 'tenant-a');
    await eventually(async () => (await keysUnder(prefix)).length === 1);
    const [cacheKey] = await keysUnder(prefix);
    const signed = (await redis.get(cacheKey!))!;
    expect(await send(app, a, key, 'tenant-a')).toMatchObject({ kind: 'replay', source: 'fast-path' });
    const entry = JSON.parse(signed.slice(signed.indexOf('.') + 1)) as Record<string, unknown>;
    const forged = JSON.stringify({ ...entry, b: Buffer.from('{"tenant":"forged"}').toString('base64') });
    // Under the genuine HMAC, and bare (as an entry without a secret is written): neither is served.
    for (const value of [`${signed.slice(0, signed.indexOf('.'))}.${forged}`, forged]) {
      await redis.sendCommand(['SET', cacheKey!, value, 'PX', '60000']);
      const retry = await send(app, a, key, 'tenant-a');
      expect(retry).toMatchObject({ kind: 'replay', source: undefined });
      expect(retry.response.body.toString()).toContain('tenant-a');
    }
  });
});
