// Operations issue, item 4: identity the user controls, on the HTTP side. The key was read only from the
// Idempotency-Key header and the whole body was fingerprinted, so a client that sends its request id in the body
// ran twice, and a retry that re-serialised a fresh `sentAt` was answered 422. The `key` and `fingerprint`
// options decide; a resolver that throws is answered 500 with nothing claimed, and the server keeps serving.
// node:http against real Postgres.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError } from '@inboxkit/core';
import { idempotencyKeys, type IdempotencyKeysConfig } from '../src/index.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import { openHttpTestDatabase, type HttpTestDB, type HttpTestDatabase } from './support/http-test-database.js';
import { listen } from './support/listen.js';

let t: HttpTestDatabase;
let server: { url: string; close(): Promise<void> };

const principal = (): string => 'alice';

beforeAll(async () => {
  t = await openHttpTestDatabase('http_resolvers');
  type Options = Partial<IdempotencyKeysConfig<HttpTestDB, IncomingMessage>>;
  const routes: Record<string, Options> = {
    '/plain': {},
    '/body-key': { key: { bodyField: 'requestId' } },
    '/nested-key': { key: { bodyField: 'meta.requestId' } },
    '/fn-key': { key: (request) => (request.body as { requestId?: string } | undefined)?.requestId },
    '/exclude': { fingerprint: { exclude: ['sentAt', 'meta.traceId'] } },
    '/include': { fingerprint: { include: ['amount'] } },
    '/fn-fingerprint': { fingerprint: (request) => (request.body as { amount?: number }).amount },
    '/key-throws': {
      key: () => {
        throw new Error('key resolver bug');
      },
    },
    '/fingerprint-throws': {
      fingerprint: () => {
        throw new Error('fingerprint resolver bug');
      },
    },
  };
  const handlers = new Map(
    Object.entries(routes).map(([path, options]) => {
      const keys = idempotencyKeys<HttpTestDB, IncomingMessage>({ db: t.db, schema: t.schema, principal, ...options });
      return [
        path,
        idempotentNodeHandler(keys, async (_request, body, context) =>
          context.transaction(async (tx) => {
            await tx.insertInto('effects').values({ label: `${path}:${context.key ?? 'none'}` }).execute();
            return { status: 201, body: { ok: true, echo: body } };
          }),
        ),
      ] as const;
    }),
  );
  server = await listen((request, response) => handlers.get(request.url ?? '')!(request, response));
});

afterAll(async () => {
  await server?.close();
  await t?.close();
});

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

async function keyRows(key: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.raw(`"${t.schema}".idempotency_key`)} WHERE idempotency_key = ${key}`.execute(t.db);
  return rows[0]?.n ?? 0;
}

describe('the key option', () => {
  it('without it, two requests with the same requestId in the body and no header are refused 400 (no key)', async () => {
    const id = randomUUID();
    expect((await post('/plain', { requestId: id, amount: 1 })).status).toBe(400);
  });

  it('with { bodyField }, two requests with the same body field and no header run the handler once', async () => {
    const id = randomUUID();
    const first = await post('/body-key', { requestId: id, amount: 1 });
    const second = await post('/body-key', { requestId: id, amount: 1 });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await second.text()).toBe(await first.text());
    expect(await t.effects(`/body-key:${id}`)).toBe(1);
  });

  it('with a nested bodyField and with a function, the same', async () => {
    const id = randomUUID();
    for (const [path, body] of [
      ['/nested-key', { meta: { requestId: id }, amount: 1 }],
      ['/fn-key', { requestId: id, amount: 1 }],
    ] as const) {
      expect((await post(path, body)).status).toBe(201);
      expect((await post(path, body)).headers.get('idempotent-replayed')).toBe('true');
      expect(await t.effects(`${path}:${id}`)).toBe(1);
    }
  });

  it('a body field that is missing is no key (400), one that is not a string is an invalid key (400)', async () => {
    const missing = await post('/body-key', { amount: 1 });
    expect(missing.status).toBe(400);
    expect(await missing.text()).toMatch(/Idempotency-Key missing/);
    const invalid = await post('/body-key', { requestId: 42, amount: 1 });
    expect(invalid.status).toBe(400);
    expect(await invalid.text()).toMatch(/requestId/);
    expect(await t.effects('/body-key:none')).toBe(0);
  });

  it('a key function that throws is answered 500, nothing claimed, and the server keeps serving', async () => {
    const response = await post('/key-throws', { amount: 1 }, { 'idempotency-key': 'k' });
    expect(response.status).toBe(500);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(await response.text()).toMatch(/idempotency key/);
    expect(await t.effects('/key-throws:k')).toBe(0);
    expect((await post('/body-key', { requestId: randomUUID(), amount: 1 })).status).toBe(201);
  });
});

describe('the fingerprint option', () => {
  it('without it, a retry with a fresh sentAt is answered 422', async () => {
    const key = randomUUID();
    expect((await post('/plain', { amount: 1, sentAt: 't1' }, { 'idempotency-key': key })).status).toBe(201);
    expect((await post('/plain', { amount: 1, sentAt: 't2' }, { 'idempotency-key': key })).status).toBe(422);
  });

  it('with exclude, the retry is replayed, not 422; another amount is still 422', async () => {
    const key = randomUUID();
    const first = await post('/exclude', { amount: 1, sentAt: 't1', meta: { traceId: 'a' } }, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    const retry = await post('/exclude', { amount: 1, sentAt: 't2', meta: { traceId: 'b' } }, { 'idempotency-key': key });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect((await post('/exclude', { amount: 2, sentAt: 't3' }, { 'idempotency-key': key })).status).toBe(422);
    expect(await t.effects(`/exclude:${key}`)).toBe(1);
  });

  it('with include and with a function, only what they keep counts', async () => {
    for (const path of ['/include', '/fn-fingerprint']) {
      const key = randomUUID();
      expect((await post(path, { amount: 1, note: 'a' }, { 'idempotency-key': key })).status).toBe(201);
      expect((await post(path, { amount: 1, note: 'b' }, { 'idempotency-key': key })).headers.get('idempotent-replayed')).toBe('true');
      expect((await post(path, { amount: 2, note: 'a' }, { 'idempotency-key': key })).status).toBe(422);
      expect(await t.effects(`${path}:${key}`)).toBe(1);
    }
  });

  it('a fingerprint function that throws is answered 500, the key never claimed, the server alive', async () => {
    const key = randomUUID();
    const response = await post('/fingerprint-throws', { amount: 1 }, { 'idempotency-key': key });
    expect(response.status).toBe(500);
    expect(await response.text()).toMatch(/fingerprint/);
    expect(await keyRows(key)).toBe(0);
    expect(await t.effects(`/fingerprint-throws:${key}`)).toBe(0);
    expect((await post('/exclude', { amount: 1 }, { 'idempotency-key': randomUUID() })).status).toBe(201);
  });
});

describe('start-up checks', () => {
  it.each([
    [{ key: { bodyField: '' } }, /key.bodyField/],
    [{ key: { bodyField: 'a..b' } }, /key.bodyField/],
    [{ key: 'query' }, /key must be 'header'/],
    [{ fingerprint: { include: ['a'], exclude: ['b'] } }, /not both/],
    [{ fingerprint: { exclude: [] } }, /non-empty array/],
    [{ fingerprint: 'sentAt' }, /must be \{ include/],
  ])('refuses %j with a ConfigurationError', (options, message) => {
    const make = () => idempotencyKeys({ db: t.db, schema: t.schema, principal, ...(options as object) });
    expect(make).toThrow(ConfigurationError);
    expect(make).toThrow(message);
  });
});
