// The server process SIGKILLed after the payment committed but before its response was written: the client's
// retry with the same key, served by a new process, gets the replay, and there is one effect.

import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChildServer, type ChildServer } from './support/child-server.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

const SERVER = fileURLToPath(new URL('./fixtures/crash-server.ts', import.meta.url));

let t: HttpTestDatabase;
const children: ChildServer[] = [];

beforeAll(async () => {
  t = await openHttpTestDatabase('http_crash');
});

afterAll(async () => {
  for (const child of children) child.kill();
  await t?.close();
});

async function startServer(crash: boolean): Promise<ChildServer> {
  const server = await startChildServer(SERVER, {
    connectionString: t.connectionString,
    schema: t.schema,
    crash,
  });
  children.push(server);
  return server;
}

describe('a server crash after the commit', () => {
  it('gives the retry the replayed response and leaves one effect', async () => {
    const key = randomUUID();
    const request = (url: string) =>
      fetch(`${url}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ amount: 42 }),
      });
    const crashing = await startServer(true);
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      crashing.child.on('exit', (_code, signal) => resolve(signal)),
    );
    await expect(request(crashing.url)).rejects.toThrow();
    expect(await exited).toBe('SIGKILL');
    expect(crashing.lines()).toContain('COMMITTED');
    expect(await t.effects(`alice:${key}`)).toBe(1);

    const healthy = await startServer(false);
    const retry = await request(healthy.url);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toMatchObject({ payment: { amount: 42 } });
    expect(await t.effects(`alice:${key}`)).toBe(1);
    healthy.kill();
  });
});
