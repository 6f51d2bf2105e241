// Both sides of the contract together: idempotentFetch against the node:http adapter on real Postgres. The
// server fails the first attempt with a 503 (key released), the client retries with the same key: one effect.

import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentFetch } from '../src/client/index.js';
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
const attempts = new Map<string, number>();

beforeAll(async () => {
  t = await openHttpTestDatabase('http_client_server');
  const keys = idempotencyKeys<HttpTestDB, IncomingMessage>({
    db: t.db,
    schema: t.schema,
    principal: () => 'alice',
  });
  server = await listen(
    idempotentNodeHandler(keys, async (_request, _body, context) => {
      const key = context.key ?? 'none';
      attempts.set(key, (attempts.get(key) ?? 0) + 1);
      return context.transaction(async (tx) => {
        await tx.insertInto('effects').values({ label: key }).execute();
        return attempts.get(key) === 1
          ? { status: 503, body: { error: 'try again' } }
          : { status: 201, body: { ok: true } };
      });
    }),
  );
});

afterAll(async () => {
  await server?.close();
  await t?.close();
});

describe('idempotentFetch with the node adapter', () => {
  it('retries a released key with the same key and ends with one effect; a second call is a new intent', async () => {
    const init = {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 3 }),
    };
    const retries: number[] = [];
    const response = await idempotentFetch(`${server.url}/payments`, init, {
      key: 'intent-1',
      baseDelayMs: 1,
      onRetry: ({ attempt }) => retries.push(attempt),
    });
    expect(response.status).toBe(201);
    expect(retries).toEqual([1]);
    expect(await t.effects('intent-1')).toBe(1);
    const again = await idempotentFetch(`${server.url}/payments`, init, { key: 'intent-1' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await t.effects('intent-1')).toBe(1);
  });
});
