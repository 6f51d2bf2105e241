// The server process SIGKILLed after the payment committed but before its response was written: the client's
// retry with the same key, served by a new process, gets the replay, and there is one effect.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

const SERVER = fileURLToPath(new URL('./fixtures/crash-server.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let t: HttpTestDatabase;
const children: ChildProcess[] = [];

beforeAll(async () => {
  t = await openHttpTestDatabase('http_crash');
});

afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await t?.close();
});

function startServer(crash: boolean): Promise<{ url: string; child: ChildProcess; lines: string[] }> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@inboxkit/source',
      '--import',
      'tsx',
      SERVER,
      JSON.stringify({ connectionString: t.connectionString, schema: t.schema, crash }),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  const lines: string[] = [];
  let err = '';
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const parts = out.split('\n');
      out = parts.pop() ?? '';
      for (const line of parts) {
        lines.push(line);
        if (line.startsWith('LISTENING ')) resolve({ url: line.slice('LISTENING '.length), child, lines });
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (!lines.some((l) => l.startsWith('LISTENING ')))
        reject(new Error(`server exited (${code ?? signal}) before listening: ${err}`));
    });
  });
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
    expect(crashing.lines).toContain('COMMITTED');
    expect(await t.effects(`alice:${key}`)).toBe(1);

    const healthy = await startServer(false);
    const retry = await request(healthy.url);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toMatchObject({ payment: { amount: 42 } });
    expect(await t.effects(`alice:${key}`)).toBe(1);
    healthy.child.kill('SIGKILL');
  });
});
