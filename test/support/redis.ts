// Real Redis for the fast-path tests: the server the run discovered (REDIS_URL, testcontainers, or
// `npm run services:up`), and a private redis-server of a test's own that it may SIGKILL, flush and restart
// without touching the shared one.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { createClient } from 'redis';
import { requireService } from './services.js';

/** What the tests use of a node-redis client. */
export interface TestRedis {
  sendCommand(args: string[], options?: { readonly timeout?: number }): Promise<unknown>;
  get(key: string): Promise<string | null>;
  pTTL(key: string): Promise<number>;
  del(key: string): Promise<number>;
  flushAll(): Promise<unknown>;
  quit(): Promise<unknown>;
  destroy(): void;
}

/** A node-redis client as the fast path wants it: no offline queue, quick reconnects, errors not thrown. */
export async function connectRedis(url = requireService('redis').url): Promise<TestRedis> {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: { connectTimeout: 1_000, reconnectStrategy: () => 50 },
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A redis-server of the test's own, on a free loopback port. */
export interface PrivateRedis {
  readonly url: string;
  /** SIGKILL: no shutdown, no save. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a private redis-server (Debian's `redis-server`, installed by `services.sh deps redis`). */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    const proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    proc.once('error', () => undefined);
    child = proc;
    const ready = new Promise<void>((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('Ready to accept connections')) resolve();
      });
      proc.once('exit', (code) =>
        reject(
          new Error(
            `redis-server exited (${String(code)}): ${out.slice(-500)} — is redis-server installed? (bash scripts/services/services.sh deps redis)`,
          ),
        ),
      );
    });
    await ready;
  };
  const kill = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = once(proc, 'exit');
    proc.kill('SIGKILL');
    await exited;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, kill, start, stop: kill };
}

/** A TCP proxy to `target` that holds every chunk from the server for `delayMs`: a Redis that answers slowly. */
export async function slowProxy(
  target: { host: string; port: number },
  delayMs: number,
): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => setTimeout(() => client.write(chunk), delayMs).unref());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Every key under `prefix` (a test's own), through the whole SCAN cursor. */
export async function keysUnder(redis: Pick<TestRedis, 'sendCommand'>, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = (await redis.sendCommand([
      'SCAN',
      cursor,
      'MATCH',
      `${prefix}*`,
      'COUNT',
      '1000',
    ])) as [string, string[]];
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}
