// The client helper against a real server: the same key on every attempt, retries only where safe, backoff
// with jitter of 50–100% of the computed delay.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentFetch, retryDelayMs } from '../src/client/index.js';
import { listen } from './support/listen.js';

/** Per path: the statuses to answer in turn (`drop` destroys the socket); the keys seen. */
const script = new Map<string, (number | 'drop')[]>();
const seen = new Map<string, string[]>();

let server: { url: string; close(): Promise<void> };

beforeAll(async () => {
  server = await listen((request: IncomingMessage, response: ServerResponse) => {
    const path = request.url ?? '/';
    seen.set(path, [...(seen.get(path) ?? []), String(request.headers['idempotency-key'])]);
    const next = script.get(path)?.shift() ?? 201;
    request.resume();
    if (next === 'drop') {
      request.socket.destroy();
      return;
    }
    response.writeHead(next, next === 409 ? { 'retry-after': '0' } : {});
    response.end(String(next));
  });
});

afterAll(async () => {
  await server?.close();
});

const fast = { baseDelayMs: 1, maxDelayMs: 5 };

async function send(
  path: string,
  statuses: (number | 'drop')[],
  options = {},
): Promise<{ status: number; keys: string[] }> {
  script.set(path, statuses);
  const response = await idempotentFetch(
    `${server.url}${path}`,
    { method: 'POST', body: '{"amount":1}' },
    { ...fast, ...options },
  );
  return { status: response.status, keys: seen.get(path) ?? [] };
}

describe('idempotentFetch', () => {
  it('retries 409, 429, 5xx and network errors with the same key until it succeeds', async () => {
    const { status, keys } = await send('/a', [409, 429, 'drop', 500]);
    expect(status).toBe(201);
    expect(keys).toHaveLength(5);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('never retries 400 or 422', async () => {
    expect(await send('/b', [400])).toEqual({ status: 400, keys: [expect.any(String)] });
    expect(await send('/c', [422])).toEqual({ status: 422, keys: [expect.any(String)] });
  });

  it('mints a new key per call and uses a given one', async () => {
    await send('/d', []);
    await send('/d', []);
    await send('/d', [], { key: 'intent-7' });
    const keys = seen.get('/d') ?? [];
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys[2]).toBe('intent-7');
  });

  it('gives up after maxAttempts with the last response', async () => {
    expect(await send('/e', [503, 503, 503, 503], { maxAttempts: 3 })).toMatchObject({
      status: 503,
      keys: [expect.any(String), expect.any(String), expect.any(String)],
    });
  });

  it('backs off exponentially with jitter of 50–100% of the computed delay, capped', () => {
    expect(retryDelayMs(1, { baseDelayMs: 100 }, () => 1)).toBe(100);
    expect(retryDelayMs(3, { baseDelayMs: 100 }, () => 1)).toBe(400);
    expect(retryDelayMs(3, { baseDelayMs: 100 }, () => 0)).toBe(200);
    expect(retryDelayMs(20, { baseDelayMs: 100, maxDelayMs: 1000 }, () => 0.999)).toBeLessThanOrEqual(1000);
    for (let i = 0; i < 100; i++) {
      const delay = retryDelayMs(2, { baseDelayMs: 100 });
      expect(delay).toBeGreaterThanOrEqual(100);
      expect(delay).toBeLessThanOrEqual(200);
    }
  });
});
