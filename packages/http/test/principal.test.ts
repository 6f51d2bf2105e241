// A key belongs to a principal. A request whose principal is empty, blank, invisible or missing would share
// one key scope with every other such request (one caller served another's stored response), so it is
// refused with 400 before anything is claimed; a principal function returning something else than a string is
// a configuration error (500 naming it). On node:http, Express and Fastify, against real Postgres.

import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeys } from '../src/index.js';
import { postRaw, startAdapterApps, type AdapterApp } from './support/adapter-apps.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;
let apps: AdapterApp[];

/** `x-principal` as given (an empty or blank string included); `x-principal-kind: number|missing` for the rest. */
function principalOf(headers: Readonly<Record<string, unknown>>): unknown {
  switch (headers['x-principal-kind']) {
    case 'number':
      return 42;
    case 'missing':
      return undefined;
    case 'null':
      return null;
    default:
      return headers['x-principal'];
  }
}

beforeAll(async () => {
  t = await openHttpTestDatabase('http_principal');
  apps = await startAdapterApps(t, principalOf);
});
afterAll(async () => {
  await Promise.all((apps ?? []).map((a) => a.close()));
  await t?.close();
});

async function keyRows(key: string): Promise<number> {
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM ${sql.raw(`"${t.schema}".idempotency_key`)} WHERE idempotency_key = ${key}`.execute(
    t.db,
  );
  return rows[0]?.n ?? 0;
}

describe.each(['node:http', 'Express', 'Fastify'] as const)('%s', (name) => {
  const app = (): AdapterApp => apps.find((a) => a.name === name)!;

  it.each([
    ['an empty principal', { 'x-principal': '' }],
    ['a blank principal', { 'x-principal': ' \t ' }],
    ['a missing principal (undefined)', { 'x-principal-kind': 'missing' }],
    ['a missing principal (null)', { 'x-principal-kind': 'null' }],
  ])('refuses %s with 400 that says why, runs nothing and stores nothing', async (_what, headers) => {
    const key = randomUUID();
    const response = await postRaw(app().url, '/pay', { amount: 1 }, { 'idempotency-key': key, ...headers });
    expect(response.status).toBe(400);
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.body).toMatch(/principal/i);
    expect(await t.effects(`${name}:${key}`)).toBe(0);
    expect(await keyRows(key)).toBe(0);
  });

  it('never serves one caller with an empty principal the response of another', async () => {
    const key = randomUUID();
    const first = await postRaw(
      app().url,
      '/pay',
      { amount: 1 },
      { 'idempotency-key': key, 'x-principal': '' },
    );
    const second = await postRaw(
      app().url,
      '/pay',
      { amount: 1 },
      { 'idempotency-key': key, 'x-principal': '' },
    );
    expect([first.status, second.status]).toEqual([400, 400]);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(await t.effects(`${name}:${key}`)).toBe(0);
  });

  it('answers a principal function that returns a non-string with a 500 that names the configuration error', async () => {
    const key = randomUUID();
    const response = await postRaw(
      app().url,
      '/pay',
      { amount: 1 },
      { 'idempotency-key': key, 'x-principal-kind': 'number' },
    );
    expect(response.status).toBe(500);
    expect(response.body).toMatch(/principal\(request\) must return a string, got number/);
    expect(await t.effects(`${name}:${key}`)).toBe(0);
  });

  it('still runs and replays for a real principal', async () => {
    const key = randomUUID();
    const first = await postRaw(
      app().url,
      '/pay',
      { amount: 1 },
      { 'idempotency-key': key, 'x-principal': 'ann' },
    );
    const again = await postRaw(
      app().url,
      '/pay',
      { amount: 1 },
      { 'idempotency-key': key, 'x-principal': 'ann' },
    );
    expect(first.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await t.effects(`${name}:${key}`)).toBe(1);
  });
});

describe('idempotencyKeys().begin', () => {
  it.each([[''], ['  '], ['\n'], ['\u200b\u2060'], ['\ufeff'], ['\u00a0\u3000'], [undefined], [null]])(
    'answers %j with kind "no-principal" and claims nothing',
    async (value) => {
      const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => value as string });
      const key = randomUUID();
      const decision = await keys.begin({
        method: 'POST',
        route: '/pay',
        headers: { 'idempotency-key': key },
        body: {},
        native: {},
      });
      expect(decision).toMatchObject({ kind: 'no-principal', response: { status: 400 } });
      expect(await keyRows(key)).toBe(0);
    },
  );

  it.each([['a\u0000b'], ['\ud800'], ['x\udc00']])(
    'refuses %j, which Postgres would not store as it is (two principals would share a scope)',
    async (value) => {
      const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => value });
      const key = randomUUID();
      await expect(
        keys.begin({
          method: 'POST',
          route: '/pay',
          headers: { 'idempotency-key': key },
          body: {},
          native: {},
        }),
      ).rejects.toMatchObject({
        code: 'CONFIGURATION',
        message: expect.stringMatching(/NUL or a lone surrogate/),
      });
      expect(await keyRows(key)).toBe(0);
    },
  );

  it('asks for no principal when the request carries no key and none is required', async () => {
    const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => '', required: false });
    const decision = await keys.begin({ method: 'POST', route: '/pay', headers: {}, body: {}, native: {} });
    expect(decision.kind).toBe('unkeyed');
  });
});
