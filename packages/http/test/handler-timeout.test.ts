// A handler that outlives handlerTimeoutMs: the client gets 503 with Retry-After, the key is released, and the
// late handler's transaction is refused by the lease fence, so the retry's effect is the only one.

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
const lateOutcome = new Map<string, Promise<string>>();

beforeAll(async () => {
  t = await openHttpTestDatabase('http_timeout');
  const keys = idempotencyKeys<HttpTestDB, IncomingMessage>({
    db: t.db,
    schema: t.schema,
    principal: () => 'alice',
    handlerTimeoutMs: 300,
  });
  server = await listen(
    idempotentNodeHandler(keys, async (request, _body, context) => {
      const key = context.key ?? 'none';
      const run = context.transaction(async (tx) => {
        await tx.insertInto('effects').values({ label: key }).execute();
        if (request.headers['x-hang'] === 'yes') {
          await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
        }
        return { status: 201, body: { ok: true } };
      });
      lateOutcome.set(
        key,
        run.then(
          () => 'committed',
          (error: { code?: string }) => error.code ?? 'error',
        ),
      );
      return run;
    }),
  );
});

afterAll(async () => {
  await server?.close();
  await t?.close();
});

describe('handlerTimeoutMs', () => {
  it('answers 503, releases the key and refuses the late commit; the retry runs, one effect', async () => {
    const key = randomUUID();
    const send = (hang: boolean) =>
      fetch(`${server.url}/slow`, {
        method: 'POST',
        headers: {
          'idempotency-key': key,
          'content-type': 'application/json',
          ...(hang ? { 'x-hang': 'yes' } : {}),
        },
        body: JSON.stringify({ amount: 1 }),
      });
    const first = await send(true);
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).toBe('1');
    expect(await lateOutcome.get(key)).toBe('LEASE_LOST');
    expect(await t.effects(key)).toBe(0);
    const retry = await send(false);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await t.effects(key)).toBe(1);
  });
});
