// Recovery points (atomic phases): a multi-step handler with an external call between its phases resumes after
// the last completed phase when its retry comes, instead of starting over.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeys } from '../src/index.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import {
  openHttpTestDatabase,
  type HttpTestDB,
  type HttpTestDatabase,
} from './support/http-test-database.js';
import { listen } from './support/listen.js';

let t: HttpTestDatabase;
let server: { url: string; close(): Promise<void> };
/** The external provider: calls by downstream key; fails the first call of each key. */
const providerCalls = new Map<string, number>();

beforeAll(async () => {
  t = await openHttpTestDatabase('http_phases');
  const keys = idempotencyKeys<HttpTestDB, IncomingMessage>({
    db: t.db,
    schema: t.schema,
    principal: () => 'alice',
  });
  server = await listen(
    idempotentNodeHandler(keys, async (_request, _body, context) => {
      const key = context.key ?? 'none';
      const reserved = await context.phase('reserve', async (tx) => {
        const row = await tx
          .insertInto('effects')
          .values({ label: `reserve:${key}` })
          .returning('seq')
          .executeTakeFirstOrThrow();
        return { reservation: row.seq };
      });
      const calls = (providerCalls.get(`${key}:charge`) ?? 0) + 1;
      providerCalls.set(`${key}:charge`, calls);
      if (calls === 1) throw new Error('provider timed out');
      return context.transaction(async (tx) => {
        await tx
          .insertInto('effects')
          .values({ label: `capture:${key}` })
          .execute();
        return { status: 201, body: { reservation: reserved.reservation, attempt: context.attempt } };
      });
    }),
  );
});

afterAll(async () => {
  await server?.close();
  await t?.close();
});

describe('recovery points', () => {
  it('resumes after the last completed phase on retry: each phase once, the external call retried with its key', async () => {
    const key = randomUUID();
    const send = () =>
      fetch(`${server.url}/orders`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
        body: '{}',
      });
    expect((await send()).status).toBe(500);
    expect(await t.effects(`reserve:${key}`)).toBe(1);
    const retry = await send();
    expect(retry.status).toBe(201);
    const body = (await retry.json()) as { reservation: string; attempt: number };
    expect(body.attempt).toBe(2);
    expect((await send()).headers.get('idempotent-replayed')).toBe('true');
    expect(await t.effects(`reserve:${key}`)).toBe(1);
    expect(await t.effects(`capture:${key}`)).toBe(1);
    expect(providerCalls.get(`${key}:charge`)).toBe(2);
  });
});
