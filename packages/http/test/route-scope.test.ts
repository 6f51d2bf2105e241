// One request spelled differently is still one request: once the first spelling ran, every spelling the
// framework hands to the same handler (trailing slash, case, doubled slashes, percent-encoding, dot segments,
// an empty query, reordered query parameters) gets the replay, never a second execution. A different resource
// (another path parameter) is another scope; a different query is another request (422). node:http, Express and
// Fastify (with its default router and with the lenient one most apps configure), against real Postgres.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalQuery, idempotencyKeys, matchedRoute, requestPath } from '../src/index.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import { postRaw, startAdapterApps, type AdapterApp, type AdapterName } from './support/adapter-apps.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';
import { listen } from './support/listen.js';

let t: HttpTestDatabase;
let apps: AdapterApp[];
let strictFastify: AdapterApp[];

beforeAll(async () => {
  t = await openHttpTestDatabase('http_route_scope');
  apps = await startAdapterApps(t, () => 'alice', {
    fastifyRouter: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, caseSensitive: false },
  });
  strictFastify = await startAdapterApps(t, () => 'alice', { only: 'Fastify' });
});
afterAll(async () => {
  await Promise.all([...(apps ?? []), ...(strictFastify ?? [])].map((a) => a.close()));
  await t?.close();
});

/** Spellings of POST /pay; the framework may refuse some (404), but none may run the handler again. */
const SPELLINGS = [
  '/pay/',
  '/PAY',
  '/Pay/',
  '//pay',
  '/pay//',
  '/p%61y',
  '/%70%61%79',
  '/./pay',
  '/x/../pay',
  '/pay/.',
  '/pay?',
  '/pay#',
  '/pay/?',
];

/** The spellings each framework is known to route to the /pay handler (so the test cannot pass by 404s alone). */
const ROUTED: Record<AdapterName | 'Fastify (default router)', readonly string[]> = {
  'node:http': [
    '/pay/',
    '//pay',
    '/pay//',
    '/p%61y',
    '/%70%61%79',
    '/./pay',
    '/x/../pay',
    '/pay/.',
    '/pay?',
    '/pay#',
    '/pay/?',
  ],
  // Express 5 (case-insensitive, not strict) answers the others 404.
  Express: ['/pay/', '/PAY', '/Pay/', '/pay?', '/pay#', '/pay/?'],
  // ignoreTrailingSlash, ignoreDuplicateSlashes, caseSensitive: false; dot segments are 404.
  Fastify: ['/pay/', '/PAY', '/Pay/', '//pay', '/pay//', '/p%61y', '/%70%61%79', '/pay?', '/pay#', '/pay/?'],
  'Fastify (default router)': ['/p%61y', '/%70%61%79', '/pay?', '/pay#'],
};

function cases(): { name: AdapterName | 'Fastify (default router)'; app: () => AdapterApp }[] {
  return [
    { name: 'node:http', app: () => apps.find((a) => a.name === 'node:http')! },
    { name: 'Express', app: () => apps.find((a) => a.name === 'Express')! },
    { name: 'Fastify', app: () => apps.find((a) => a.name === 'Fastify')! },
    { name: 'Fastify (default router)', app: () => strictFastify[0]! },
  ];
}

describe.each(cases())('$name', ({ name, app }) => {
  const label = (key: string, suffix = ''): string =>
    `${name.replace(' (default router)', '')}:${key}${suffix}`;

  // node:http has no router: case is the application's to fold (see the route-function test below).
  const spellings = name === 'node:http' ? SPELLINGS.filter((s) => s.toLowerCase() === s) : SPELLINGS;

  it.each(spellings)('POST /pay, then %s with the same key: never a second execution', async (spelling) => {
    const key = randomUUID();
    const first = await postRaw(app().url, '/pay', { amount: 1 }, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    const again = await postRaw(app().url, spelling, { amount: 1 }, { 'idempotency-key': key });
    if (ROUTED[name].includes(spelling)) {
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
    } else {
      expect(again.headers['idempotent-replayed'] === 'true' || again.status === 404).toBe(true);
    }
    expect(await t.effects(label(key))).toBe(1);
  });

  it('scopes by path parameter: the same resource spelled otherwise replays, another resource is another key', async () => {
    const key = randomUUID();
    const first = await postRaw(app().url, '/payments/42/refund', { amount: 1 }, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    for (const spelling of ['/payments/42/refund/', '/payments//42/refund']) {
      const again = await postRaw(app().url, spelling, { amount: 1 }, { 'idempotency-key': key });
      expect(again.headers['idempotent-replayed'] === 'true' || again.status === 404).toBe(true);
    }
    const other = await postRaw(app().url, '/payments/43/refund', { amount: 1 }, { 'idempotency-key': key });
    expect(other.status).toBe(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(await t.effects(label(key, ':42'))).toBe(1);
    expect(await t.effects(label(key, ':43'))).toBe(1);
  });

  it('treats the query as part of the request: reordered parameters replay, other values are 422', async () => {
    const key = randomUUID();
    expect(
      (await postRaw(app().url, '/pay?a=1&b=x%20y', { amount: 1 }, { 'idempotency-key': key })).status,
    ).toBe(201);
    const reordered = await postRaw(app().url, '/pay?b=x+y&a=1', { amount: 1 }, { 'idempotency-key': key });
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    expect(
      (await postRaw(app().url, '/pay?a=2&b=x%20y', { amount: 1 }, { 'idempotency-key': key })).status,
    ).toBe(422);
    expect((await postRaw(app().url, '/pay', { amount: 1 }, { 'idempotency-key': key })).status).toBe(422);
    expect(await t.effects(label(key))).toBe(1);
  });
});

describe.each(['Express', 'Fastify'] as const)('%s, a router mounted under a prefix', (name) => {
  it('replays /v1/pay/ after /v1/pay and keeps /pay a different route', async () => {
    const app = apps.find((a) => a.name === name)!;
    const key = randomUUID();
    expect((await postRaw(app.url, '/v1/pay', { amount: 1 }, { 'idempotency-key': key })).status).toBe(201);
    const again = await postRaw(app.url, '/v1/pay/', { amount: 1 }, { 'idempotency-key': key });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await postRaw(app.url, '/pay', { amount: 1 }, { 'idempotency-key': key })).status).toBe(201);
    expect(await t.effects(`${name}:${key}:v1`)).toBe(1);
    expect(await t.effects(`${name}:${key}`)).toBe(1);
  });
});

describe('node:http with a route function', () => {
  it('keeps case by default: /PAY is another path, as RFC 3986 reads it', async () => {
    const app = apps.find((a) => a.name === 'node:http')!;
    const key = randomUUID();
    expect((await postRaw(app.url, '/pay', { amount: 1 }, { 'idempotency-key': key })).status).toBe(201);
    const upper = await postRaw(app.url, '/PAY', { amount: 1 }, { 'idempotency-key': key });
    expect(upper.status).toBe(201);
    expect(upper.headers['idempotent-replayed']).toBeUndefined();
  });

  it('lets an application whose dispatch ignores case scope case-insensitively with requestPath', async () => {
    const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => 'alice' });
    const server = await listen(
      idempotentNodeHandler(
        keys,
        async (_request, _body, context) =>
          context.transaction(async (tx) => {
            await tx
              .insertInto('effects')
              .values({ label: `case:${context.key ?? '-'}` })
              .execute();
            return { status: 201, body: 'ok' };
          }),
        { route: (request) => requestPath(request.url ?? '/').toLowerCase() },
      ),
    );
    try {
      const key = randomUUID();
      expect((await postRaw(server.url, '/Pay', {}, { 'idempotency-key': key })).status).toBe(201);
      const again = await postRaw(server.url, '/PAY/', {}, { 'idempotency-key': key });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(await t.effects(`case:${key}`)).toBe(1);
    } finally {
      await server.close();
    }
  });
});

describe('requestPath', () => {
  it.each([
    ['/pay', '/pay'],
    ['/pay/', '/pay'],
    ['//pay//', '/pay'],
    ['/p%61y', '/pay'],
    ['/%7euser', '/~user'],
    ['/a%2fb', '/a%2Fb'],
    ['/a%2Fb/', '/a%2Fb'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/./a/b/../c/.', '/a/c'],
    ['/../a', '/a'],
    ['/%2e%2E/a', '/a'],
    ['/pay?x=1#y', '/pay'],
    ['/pay#y', '/pay'],
    ['http://api.example.com/pay/?x', '/pay'],
    ['', '/'],
    ['/', '/'],
    ['*', '*'],
    ['/PAY', '/PAY'],
  ])('%s → %s', (url, path) => {
    expect(requestPath(url)).toBe(path);
  });
});

describe('canonicalQuery', () => {
  it.each([
    ['/pay', ''],
    ['/pay?', ''],
    ['/pay?#x', ''],
    ['?b=2&a=1', 'a=1&b=2'],
    ['/pay?b=x+y&a=1#frag', 'a=1&b=x%20y'],
    ['/pay?a=2&a=1', 'a=2&a=1'],
    ['/pay?a', 'a='],
    ['/pay?%61=1', 'a=1'],
  ])('%s → %j', (target, query) => {
    expect(canonicalQuery(target)).toBe(query);
  });
});

describe('matchedRoute', () => {
  it('is the pattern, then the parameters sorted and encoded', () => {
    expect(matchedRoute('/pay')).toBe('/pay');
    expect(matchedRoute('/v1/')).toBe('/v1');
    expect(matchedRoute('/')).toBe('/');
    expect(matchedRoute('/p/:id', {})).toBe('/p/:id');
    expect(matchedRoute('/p/:b/:a', { b: 'x y', a: '1' })).toBe('/p/:b/:a a=1&b=x%20y');
    expect(matchedRoute('/files/*splat', { splat: ['a', 'b c'] })).toBe('/files/*splat splat=a/b%20c');
  });
});
