// Two Idempotency-Key headers on one request: Node joins them into one `a, b`, a third key that is neither of
// the client's. Every adapter answers 400 instead, runs nothing and claims no key.

import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdapterApps, type AdapterApp } from './support/adapter-apps.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;
let apps: AdapterApp[];

beforeAll(async () => {
  t = await openHttpTestDatabase('http_dup_key');
  apps = await startAdapterApps(t, () => 'alice');
});

afterAll(async () => {
  for (const app of apps ?? []) await app.close();
  await t?.close();
});

/** POSTs `{}` to /pay with each of `keys` as an Idempotency-Key header line of its own. */
function postWithKeys(base: string, keys: readonly string[]): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method: 'POST', path: '/pay' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.setHeader('content-type', 'application/json');
    // An array sends one header line per value.
    req.setHeader('idempotency-key', [...keys]);
    req.on('error', reject);
    req.end('{}');
  });
}

describe('two Idempotency-Key headers', () => {
  for (const name of ['node:http', 'Express', 'Fastify'] as const) {
    it(`${name}: answers 400 naming the repeat, runs nothing, and leaves both keys unclaimed`, async () => {
      const app = apps.find((a) => a.name === name)!;
      const [a, b] = [randomUUID(), randomUUID()];
      const answer = await postWithKeys(app.url, [a, b]);
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toEqual({
        status: 400,
        title: 'Several Idempotency-Keys',
        detail: 'The request carries 2 Idempotency-Key headers; send exactly one.',
      });
      expect(await t.effects(`${name}:${a}, ${b}`)).toBe(0);
      // Neither key was claimed: each runs once on its own.
      expect((await postWithKeys(app.url, [a])).status).toBe(201);
      expect((await postWithKeys(app.url, [b])).status).toBe(201);
      expect(await t.effects(`${name}:${a}`)).toBe(1);
      expect(await t.effects(`${name}:${b}`)).toBe(1);
    });
  }
});
