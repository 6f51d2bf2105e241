// The Idempotency-Key protocol through the node:http adapter, against a real server and real Postgres.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeys, type IdempotencyKeys } from '../src/index.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import {
  openHttpTestDatabase,
  type HttpTestDB,
  type HttpTestDatabase,
} from './support/http-test-database.js';
import { listen } from './support/listen.js';

interface Payment {
  amount: number;
  fail?: 'once' | 'always';
  big?: number;
}

let t: HttpTestDatabase;
let keys: IdempotencyKeys<HttpTestDB, IncomingMessage>;
let server: { url: string; close(): Promise<void> };
const failedOnce = new Set<string>();

function principalOf(request: { headers: Record<string, unknown> }): string {
  const value = request.headers['x-principal'];
  return typeof value === 'string' ? value : 'alice';
}

beforeAll(async () => {
  t = await openHttpTestDatabase('http_node');
  keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: principalOf, maxResponseBytes: 4096 });
  const payments = idempotentNodeHandler(keys, async (request, body, context) => {
    const payment = body as Payment;
    const label = `${principalOf(request)}:${context.key ?? 'none'}`;
    return context.transaction(async (tx) => {
      const row = await tx.insertInto('effects').values({ label }).returning('seq').executeTakeFirstOrThrow();
      if (payment.fail === 'always' || (payment.fail === 'once' && !failedOnce.has(label))) {
        failedOnce.add(label);
        return { status: 503, body: { error: 'downstream unavailable' } };
      }
      return {
        status: 201,
        headers: { location: `/payments/${row.seq}`, 'x-not-replayed': 'yes' },
        body: { id: row.seq, amount: payment.amount, pad: 'x'.repeat(payment.big ?? 0) },
      };
    });
  });
  const optional = idempotentNodeHandler(keys, async () => ({ status: 200, body: 'ok' }), {
    required: false,
    maxBodyBytes: 64,
  });
  const boom = idempotentNodeHandler(keys, () => Promise.reject(new Error('password=hunter2')));
  server = await listen((request, response) =>
    (request.url === '/optional' ? optional : request.url === '/boom' ? boom : payments)(request, response),
  );
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

describe('idempotentNodeHandler', () => {
  it('runs 20 parallel requests with one key once: the others get 409 or the replayed response', async () => {
    const key = randomUUID();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => post('/payments', { amount: 10 }, { 'idempotency-key': key })),
    );
    const results = await Promise.all(
      responses.map(async (r) => ({
        status: r.status,
        replayed: r.headers.get('idempotent-replayed'),
        retryAfter: r.headers.get('retry-after'),
        body: await r.text(),
      })),
    );
    const fresh = results.filter((r) => r.status === 201 && r.replayed === null);
    expect(fresh).toHaveLength(1);
    for (const r of results) {
      if (r.status === 409) expect(r.retryAfter).toBe('1');
      else {
        expect(r.status).toBe(201);
        expect(r.body).toBe(fresh[0]?.body);
      }
    }
    expect(await t.effects(`alice:${key}`)).toBe(1);
  });

  it('replays the stored status, body and allow-listed headers byte for byte, marked Idempotent-Replayed', async () => {
    const key = randomUUID();
    const first = await post('/payments', { amount: 5 }, { 'idempotency-key': key });
    const firstBody = await first.text();
    const second = await post('/payments', { amount: 5 }, { 'idempotency-key': key });
    expect(second.status).toBe(201);
    expect(await second.text()).toBe(firstBody);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('location')).toBe(first.headers.get('location'));
    expect(second.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(second.headers.get('x-not-replayed')).toBeNull();
    expect(await t.effects(`alice:${key}`)).toBe(1);
  });

  it('answers 422 when the same key comes with another payload, key order of the JSON not mattering', async () => {
    const key = randomUUID();
    expect((await post('/payments', { amount: 7, fail: undefined }, { 'idempotency-key': key })).status).toBe(
      201,
    );
    const reordered = await fetch(`${server.url}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{ "amount" : 7 }',
    });
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    const other = await post('/payments', { amount: 8 }, { 'idempotency-key': key });
    expect(other.status).toBe(422);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
    expect(await t.effects(`alice:${key}`)).toBe(1);
  });

  it('keeps the same key from another principal independent', async () => {
    const key = randomUUID();
    const alice = await post('/payments', { amount: 1 }, { 'idempotency-key': key });
    const bob = await post('/payments', { amount: 2 }, { 'idempotency-key': key, 'x-principal': 'bob' });
    expect(alice.status).toBe(201);
    expect(bob.status).toBe(201);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(((await bob.json()) as Payment).amount).toBe(2);
    expect(await t.effects(`alice:${key}`)).toBe(1);
    expect(await t.effects(`bob:${key}`)).toBe(1);
  });

  it('runs an expired key as a new execution', async () => {
    const key = randomUUID();
    await post('/payments', { amount: 3 }, { 'idempotency-key': key });
    await sql`UPDATE ${sql.raw(`"${t.schema}".idempotency_key`)} SET expires_at = now() - interval '1 second' WHERE idempotency_key = ${key}`.execute(
      t.db,
    );
    const again = await post('/payments', { amount: 3 }, { 'idempotency-key': key });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await t.effects(`alice:${key}`)).toBe(2);
  });

  it('lets a retry take over a key whose lease expired while in flight', async () => {
    const key = randomUUID();
    const decision = await keys.begin({
      method: 'POST',
      route: '/payments',
      headers: { 'idempotency-key': key },
      body: { amount: 4 },
      native: {} as IncomingMessage,
    });
    expect(decision.kind).toBe('proceed');
    const busy = await post('/payments', { amount: 4 }, { 'idempotency-key': key });
    expect(busy.status).toBe(409);
    await sql`UPDATE ${sql.raw(`"${t.schema}".idempotency_key`)} SET locked_until = now() - interval '1 second' WHERE idempotency_key = ${key}`.execute(
      t.db,
    );
    const takeover = await post('/payments', { amount: 4 }, { 'idempotency-key': key });
    expect(takeover.status).toBe(201);
    if (decision.kind === 'proceed')
      await expect(decision.complete({ status: 201 })).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await t.effects(`alice:${key}`)).toBe(1);
  });

  it('refuses a missing, oversize or unprintable key with 400, and runs without a key where none is required', async () => {
    expect((await post('/payments', { amount: 1 })).status).toBe(400);
    const oversize = await post('/payments', { amount: 1 }, { 'idempotency-key': 'k'.repeat(256) });
    expect(oversize.status).toBe(400);
    expect(await oversize.text()).toMatch(/1 to 255 printable/);
    expect((await post('/payments', { amount: 1 }, { 'idempotency-key': 'k'.repeat(255) })).status).toBe(201);
    expect((await post('/payments', { amount: 1 }, { 'idempotency-key': 'caf\u00e9' })).status).toBe(400);
    expect((await post('/optional', { amount: 1 })).status).toBe(200);
  });

  it('answers 500 for a handler error without its message, and releases the key', async () => {
    const key = randomUUID();
    const response = await post('/boom', { amount: 1 }, { 'idempotency-key': key });
    expect(response.status).toBe(500);
    expect(await response.text()).not.toContain('hunter2');
    const row = await sql<{
      status: string;
    }>`SELECT status FROM ${sql.raw(`"${t.schema}".idempotency_key`)} WHERE idempotency_key = ${key}`.execute(
      t.db,
    );
    expect(row.rows[0]?.status).toBe('released');
  });

  it('answers 413 for a body over maxBodyBytes', async () => {
    const response = await post('/optional', { pad: 'x'.repeat(100) }, { 'idempotency-key': randomUUID() });
    expect(response.status).toBe(413);
    expect(await response.text()).toMatch(/exceeds 64 bytes/);
  });

  it('fails clearly when the response is too large to store, rolling back the effect and releasing the key', async () => {
    const key = randomUUID();
    const response = await post('/payments', { amount: 1, big: 5000 }, { 'idempotency-key': key });
    expect(response.status).toBe(500);
    expect(await response.text()).toMatch(/exceeds maxResponseBytes \(4096\)/);
    expect(await t.effects(`alice:${key}`)).toBe(0);
    const row = await sql<{
      status: string;
    }>`SELECT status FROM ${sql.raw(`"${t.schema}".idempotency_key`)} WHERE idempotency_key = ${key}`.execute(
      t.db,
    );
    expect(row.rows[0]?.status).toBe('released');
  });

  it('releases the key on a 5xx so the retry really runs, with one effect in the end', async () => {
    const key = randomUUID();
    const first = await post('/payments', { amount: 9, fail: 'once' }, { 'idempotency-key': key });
    expect(first.status).toBe(503);
    expect(await t.effects(`alice:${key}`)).toBe(0);
    const retry = await post('/payments', { amount: 9, fail: 'once' }, { 'idempotency-key': key });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    const replay = await post('/payments', { amount: 9, fail: 'once' }, { 'idempotency-key': key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await t.effects(`alice:${key}`)).toBe(1);
  });
});
