// One suite every adapter passes (the watermill habit): the same payment route behind each framework, checked
// against a real server and real Postgres.

import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { IdempotencyContext, IdempotentResponseInit } from '../../src/index.js';
import type { HttpTestDB, HttpTestDatabase } from './http-test-database.js';

export interface PaymentBody {
  amount: number;
  fail?: 'once' | 'throw-once';
}

/** The route every adapter mounts at POST /payments; principal from `x-principal` (default alice). */
export function paymentRoute(): (
  principal: string,
  body: PaymentBody,
  context: IdempotencyContext<HttpTestDB>,
) => Promise<IdempotentResponseInit> {
  const failed = new Set<string>();
  return async (principal, body, context) => {
    const label = `${principal}:${context.key ?? 'none'}`;
    if (body.fail === 'throw-once' && !failed.has(label)) {
      failed.add(label);
      throw new Error('handler crashed');
    }
    return context.transaction(async (tx) => {
      const row = await tx.insertInto('effects').values({ label }).returning('seq').executeTakeFirstOrThrow();
      if (body.fail === 'once' && !failed.has(label)) {
        failed.add(label);
        return { status: 502, body: { error: 'bad gateway' } };
      }
      return {
        status: 201,
        headers: { location: `/payments/${row.seq}` },
        body: { id: row.seq, amount: body.amount },
      };
    });
  };
}

export function principalHeader(headers: Record<string, unknown>): string {
  const value = headers['x-principal'];
  return typeof value === 'string' ? value : 'alice';
}

/** The contract: `url()` is the running server's base URL. */
export function adapterContract(name: string, url: () => string, database: () => HttpTestDatabase): void {
  const post = (body: unknown, headers: Record<string, string>): Promise<Response> =>
    fetch(`${url()}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  describe(`${name} adapter`, () => {
    it('runs 20 parallel requests with one key once: the others get 409 or the replayed response', async () => {
      const key = randomUUID();
      const responses = await Promise.all(
        Array.from({ length: 20 }, () => post({ amount: 10 }, { 'idempotency-key': key })),
      );
      const results = await Promise.all(
        responses.map(async (r) => ({
          status: r.status,
          replayed: r.headers.get('idempotent-replayed'),
          body: await r.text(),
        })),
      );
      const fresh = results.filter((r) => r.status === 201 && r.replayed === null);
      expect(fresh).toHaveLength(1);
      for (const r of results) {
        expect([201, 409]).toContain(r.status);
        if (r.status === 201) expect(r.body).toBe(fresh[0]?.body);
      }
      expect(await database().effects(`alice:${key}`)).toBe(1);
    });

    it('replays byte for byte with Idempotent-Replayed, 422 for another payload, independent per principal', async () => {
      const key = randomUUID();
      const first = await post({ amount: 5 }, { 'idempotency-key': key });
      const firstBody = await first.text();
      const replay = await post({ amount: 5 }, { 'idempotency-key': key });
      expect(replay.status).toBe(201);
      expect(await replay.text()).toBe(firstBody);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('location')).toBe(first.headers.get('location'));
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect((await post({ amount: 6 }, { 'idempotency-key': key })).status).toBe(422);
      const bob = await post({ amount: 6 }, { 'idempotency-key': key, 'x-principal': 'bob' });
      expect(bob.status).toBe(201);
      expect(bob.headers.get('idempotent-replayed')).toBeNull();
      expect(await database().effects(`alice:${key}`)).toBe(1);
      expect(await database().effects(`bob:${key}`)).toBe(1);
    });

    it('answers 400 without a key or with an invalid one', async () => {
      expect((await post({ amount: 1 }, {})).status).toBe(400);
      expect((await post({ amount: 1 }, { 'idempotency-key': 'k'.repeat(256) })).status).toBe(400);
    });

    it('releases the key on a 5xx and on a thrown error, so the retry runs: one effect', async () => {
      const key = randomUUID();
      expect((await post({ amount: 2, fail: 'once' }, { 'idempotency-key': key })).status).toBe(502);
      expect((await post({ amount: 2, fail: 'once' }, { 'idempotency-key': key })).status).toBe(201);
      const thrown = randomUUID();
      expect((await post({ amount: 2, fail: 'throw-once' }, { 'idempotency-key': thrown })).status).toBe(500);
      expect((await post({ amount: 2, fail: 'throw-once' }, { 'idempotency-key': thrown })).status).toBe(201);
      expect(await database().effects(`alice:${key}`)).toBe(1);
      expect(await database().effects(`alice:${thrown}`)).toBe(1);
    });
  });
}
