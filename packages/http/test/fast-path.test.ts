// The HTTP middleware's fast path on real Redis in front of real Postgres, through node:http, Express and
// Fastify: a retry of a completed key is answered from Redis without a statement to Postgres, byte for byte;
// another payload under the key still gets 422 from Postgres; a slow Redis costs at most the timeout; Redis
// SIGKILLed, restarted and flushed mid-run runs no handler twice and loses no request. Then, at the protocol's
// level: a cached response of another request is never served; only durably stored responses are cached, never
// longer than their key's retention, never one larger than the limit; a bad fastPath is refused at start-up;
// every lookup is counted in inboxkit.fast_path by result, under scope inboxkit-http (a hit, a miss, a bypass),
// and a bypass is said once on the middleware's logger.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigurationError, fastPathScope, type FastPath } from '@inboxkit/core';
import { metrics } from '@opentelemetry/api';
import { databaseIdentity, kyselySeam, type SqlSeam } from '@inboxkit/core/postgres';
import { redisFastPath } from '@inboxkit/core/redis';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordingLogger } from '../../../test/support/recording-logger.js';
import { recordingMeterProvider } from '../../../test/support/recording-meter-provider.js';
import { connectRedis, slowProxy, startPrivateRedis, type TestRedis } from '../../../test/support/redis.js';
import { requireService } from '../../../test/support/services.js';
import { cachedResponseId, HTTP_FAST_PATH_SCOPE } from '../src/cached-response.js';
import { idempotentExpressHandler } from '../src/express/index.js';
import { idempotentFastifyHandler } from '../src/fastify/index.js';
import {
  idempotencyKeys,
  type IdempotencyContext,
  type IdempotencyKeysConfig,
  type IdempotentResponseInit,
} from '../src/index.js';
import { resolveIdempotencyKeyTableNames } from '../src/idempotency-key-table-names.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import {
  openHttpTestDatabase,
  type HttpTestDB,
  type HttpTestDatabase,
} from './support/http-test-database.js';
import { listen } from './support/listen.js';
import { eventually } from '../../../test/support/eventually.js';

const ADAPTERS = ['node:http', 'Express', 'Fastify'] as const;
type Adapter = (typeof ADAPTERS)[number];

let t: HttpTestDatabase;
let redis: TestRedis;
/** The key table's identity, which every key names. */
let identity: string;
beforeAll(async () => {
  t = await openHttpTestDatabase('http_fast_path');
  redis = await connectRedis();
  identity = await databaseIdentity(
    (statement) => kyselySeam(t.db).query(statement),
    resolveIdempotencyKeyTableNames({ schema: t.schema }).qualifiedTable,
  );
});
afterAll(async () => {
  await redis?.quit();
  await t?.close();
});

type Seam = SqlSeam<Transaction<HttpTestDB>>;

/** The test database's Kysely seam, counting the statements and transactions the middleware sends. */
function countingSeam(): { seam: Seam; statements: () => number } {
  const inner = kyselySeam(t.db);
  let statements = 0;
  const seam: Seam = {
    query: (statement) => {
      statements += 1;
      return inner.query(statement);
    },
    transaction: (work, options) => {
      statements += 1;
      return inner.transaction(work, options);
    },
  };
  return { seam, statements: () => statements };
}

/** The Redis key of a cached response (the default prefix of redisFastPath), in the test table's scope. */
const redisKey = (principal: string, route: string, key: string): string => {
  const scope = fastPathScope(identity, HTTP_FAST_PATH_SCOPE);
  return `inboxkit:fp:${scope.length}:${scope}:${cachedResponseId(principal, 'POST', route, key)}`;
};

interface PayBody {
  amount: number;
  pad?: number;
}

const principalOf = (headers: Record<string, unknown>): string =>
  typeof headers['x-principal'] === 'string' ? headers['x-principal'] : 'alice';

/** POST /pay's handler: one effect per execution, labelled `<adapter>:<principal>:<key>`. */
function pay(
  label: string,
  body: PayBody,
  context: IdempotencyContext<HttpTestDB>,
): Promise<IdempotentResponseInit> {
  return context.transaction(async (tx) => {
    const row = await tx.insertInto('effects').values({ label }).returning('seq').executeTakeFirstOrThrow();
    return {
      status: 201,
      headers: { location: `/pay/${row.seq}` },
      body: { seq: row.seq, amount: body.amount, pad: 'x'.repeat(body.pad ?? 0) },
    };
  });
}

/** Starts POST /pay on `adapter` with keys on `seam` and `fastPath`. */
async function startApp(
  adapter: Adapter,
  seam: Seam,
  fastPath: FastPath,
  options: Partial<IdempotencyKeysConfig<HttpTestDB>> = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const config = {
    seam,
    schema: t.schema,
    fastPath,
    principal: (request: { native: { headers: Record<string, unknown> } }) =>
      principalOf(request.native.headers),
    ...options,
  };
  const label = (headers: Record<string, unknown>, context: IdempotencyContext<HttpTestDB>): string =>
    `${adapter}:${principalOf(headers)}:${context.key ?? '-'}`;
  if (adapter === 'node:http') {
    const keys = idempotencyKeys<HttpTestDB, IncomingMessage>(config);
    return listen(
      idempotentNodeHandler(keys, (request, body, context) =>
        pay(label(request.headers, context), body as PayBody, context),
      ),
    );
  }
  if (adapter === 'Express') {
    const keys = idempotencyKeys<HttpTestDB, Request>(config);
    const app = express();
    app.post(
      '/pay',
      express.json(),
      idempotentExpressHandler(keys, (request, context) =>
        pay(label(request.headers, context), request.body as PayBody, context),
      ),
    );
    app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
      response.status(500).json({ error: error.message });
    });
    return listen(app);
  }
  const keys = idempotencyKeys<HttpTestDB, FastifyRequest>(config);
  const app = Fastify();
  app.post(
    '/pay',
    idempotentFastifyHandler(keys, (request, context) =>
      pay(label(request.headers, context), request.body as PayBody, context),
    ),
  );
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
}

async function post(
  url: string,
  key: string,
  body: PayBody,
): Promise<{ status: number; body: string; location: string | null; replayed: string | null }> {
  const response = await fetch(`${url}/pay`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    body: await response.text(),
    location: response.headers.get('location'),
    replayed: response.headers.get('idempotent-replayed'),
  };
}

/** A FastPath that counts what Redis answered: values found, and failures (errors or stalls). */
function countingFastPath(inner: FastPath): {
  fastPath: FastPath;
  found: () => number;
  failed: () => number;
} {
  let found = 0;
  let failed = 0;
  const count = <T>(work: Promise<T>, values: (r: T) => number): Promise<T> =>
    work.then(
      (r) => {
        found += values(r);
        return r;
      },
      (error: unknown) => {
        failed += 1;
        throw error;
      },
    );
  return {
    fastPath: {
      timeoutMs: inner.timeoutMs,
      lookup: (scope, id) => count(inner.lookup(scope, id), (v) => (v === undefined ? 0 : 1)),
      remember: (scope, id, value, ttlMs) => inner.remember(scope, id, value, ttlMs),
    },
    found: () => found,
    failed: () => failed,
  };
}

describe.each(ADAPTERS)('the fast path through %s', (adapter) => {
  it('answers a retry of a completed key from Redis, byte for byte, without a statement to Postgres', async () => {
    const counting = countingSeam();
    const app = await startApp(adapter, counting.seam, redisFastPath({ client: redis }));
    try {
      const key = randomUUID();
      const first = await post(app.url, key, { amount: 5 });
      expect(first.status).toBe(201);
      await eventually(async () => (await redis.get(redisKey('alice', '/pay', key))) !== null);
      const before = counting.statements();
      const retry = await post(app.url, key, { amount: 5 });
      expect(counting.statements()).toBe(before);
      expect(retry).toEqual({ ...first, replayed: 'true' });
      expect(await t.effects(`${adapter}:alice:${key}`)).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('sends another payload under a cached key to Postgres, which answers 422', async () => {
    const counting = countingSeam();
    const app = await startApp(adapter, counting.seam, redisFastPath({ client: redis }));
    try {
      const key = randomUUID();
      expect((await post(app.url, key, { amount: 5 })).status).toBe(201);
      await eventually(async () => (await redis.get(redisKey('alice', '/pay', key))) !== null);
      const before = counting.statements();
      const other = await post(app.url, key, { amount: 6 });
      expect(other.status).toBe(422);
      expect(counting.statements()).toBeGreaterThan(before);
      expect(await t.effects(`${adapter}:alice:${key}`)).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('does not slow a request beyond the timeout when Redis answers slowly', async () => {
    const { host, port } = requireService('redis');
    const proxy = await slowProxy({ host, port }, 2_000);
    const slow = await connectRedis(proxy.url);
    const app = await startApp(adapter, kyselySeam(t.db), redisFastPath({ client: slow, timeoutMs: 20 }));
    try {
      const keys = [randomUUID(), randomUUID(), randomUUID()];
      const slowest: number[] = [];
      for (const key of [...keys, ...keys]) {
        const started = performance.now();
        const response = await post(app.url, key, { amount: 1 });
        slowest.push(performance.now() - started);
        expect(response.status).toBe(201);
      }
      // Each request waited at most the 20 ms timeout for Redis, never its 2 s: Postgres answered.
      expect(Math.max(...slowest)).toBeLessThan(1_500);
      for (const key of keys) expect(await t.effects(`${adapter}:alice:${key}`)).toBe(1);
    } finally {
      await app.close();
      slow.destroy();
      await proxy.close();
    }
  });

  it('runs no handler twice and loses no request while Redis is SIGKILLed, restarted and flushed mid-run', async () => {
    const server = await startPrivateRedis();
    const client = await connectRedis(server.url);
    // A generous timeout: this test is about correctness on a shared, busy machine, not speed.
    const counting = countingFastPath(redisFastPath({ client, timeoutMs: 200 }));
    const app = await startApp(adapter, kyselySeam(t.db), counting.fastPath);
    try {
      const keys = Array.from({ length: 48 }, () => randomUUID());
      // Each key four times, 8 at a time, its retries spread over the run.
      const queue = keys.flatMap((_, k) =>
        [0, 8, 16, 24].filter((lag) => k >= lag).map((lag) => keys[k - lag]!),
      );
      for (let k = keys.length - 24; k < keys.length; k++)
        for (const lag of [8, 16, 24]) if (k + lag >= keys.length) queue.push(keys[k]!);
      const responses = new Map<string, Awaited<ReturnType<typeof post>>[]>();
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < queue.length) {
            const i = next++;
            if (i === 50) await server.kill();
            if (i === 100) await server.start();
            if (i === 150) await client.flushAll().catch(() => undefined);
            const key = queue[i]!;
            let response = await post(app.url, key, { amount: 7 });
            // 409 while the first request is in flight: a client retries, as Retry-After says.
            while (response.status === 409) {
              await sleep(20);
              response = await post(app.url, key, { amount: 7 });
            }
            responses.set(key, [...(responses.get(key) ?? []), response]);
          }
        }),
      );
      for (const key of keys) {
        const answers = responses.get(key)!;
        expect(answers).toHaveLength(4);
        // 0 lost: every request answered 201 with the one response, three of them replays; 0 double executions.
        const fresh = answers.filter((a) => a.replayed === null);
        expect(fresh).toHaveLength(1);
        for (const answer of answers) expect(answer).toEqual({ ...fresh[0], replayed: answer.replayed });
        expect(fresh[0]!.status).toBe(201);
        expect(await t.effects(`${adapter}:alice:${key}`)).toBe(1);
      }
      // The run went through both: Redis answering before the kill and after the restart, failing while down.
      expect(counting.found()).toBeGreaterThan(0);
      expect(counting.failed()).toBeGreaterThan(0);
    } finally {
      await app.close();
      await client.quit().catch(() => undefined);
      await server.stop();
    }
  });
});

describe('the fast path at the protocol level', () => {
  const request = (key: string, body: unknown, principal = 'alice') => ({
    method: 'POST',
    route: '/charges',
    headers: { 'idempotency-key': key },
    body,
    native: { principal },
  });
  function keysWith(
    fastPath: FastPath,
    options: Partial<IdempotencyKeysConfig<HttpTestDB, { principal: string }>> = {},
  ) {
    return idempotencyKeys<HttpTestDB, { principal: string }>({
      db: t.db,
      schema: t.schema,
      fastPath,
      principal: (r) => r.native.principal,
      ...options,
    });
  }
  const cacheKey = (key: string, principal = 'alice'): string => redisKey(principal, '/charges', key);
  /** Runs a request through `keys`: the decision's kind and source, and the response. */
  async function send(
    keys: ReturnType<typeof keysWith>,
    key: string,
    body: unknown,
    status = 201,
    principal = 'alice',
  ) {
    const decision = await keys.begin(request(key, body, principal));
    if (decision.kind === 'unkeyed') throw new Error('unkeyed');
    if (decision.kind !== 'proceed')
      return { kind: decision.kind, source: decision.source, response: decision.response };
    const response = await decision.transaction(async (tx) => {
      await tx
        .insertInto('effects')
        .values({ label: `protocol:${principal}:${key}` })
        .execute();
      return { status, body: { charged: body } };
    });
    return { kind: 'proceed', source: undefined, response };
  }

  it('never answers from a cached response whose request fingerprint differs, even one planted under the key', async () => {
    const keys = keysWith(redisFastPath({ client: redis }));
    const key = randomUUID();
    expect((await send(keys, key, { amount: 1 })).kind).toBe('proceed');
    await eventually(async () => (await redis.get(cacheKey(key))) !== null);
    // Another body under the same key: Postgres answers 422, whatever Redis holds.
    const other = await send(keys, key, { amount: 2 });
    expect(other).toMatchObject({ kind: 'mismatch', source: undefined });
    expect(other.response.status).toBe(422);
    // A value for the key recording another request's response (a forged or stale entry): never served.
    const forged = JSON.stringify({
      f: '0'.repeat(64),
      s: 200,
      h: {},
      b: Buffer.from('forged').toString('base64'),
    });
    const fresh = randomUUID();
    await redis.sendCommand(['SET', cacheKey(fresh), forged, 'PX', '60000']);
    const first = await send(keys, fresh, { amount: 3 });
    expect(first.kind).toBe('proceed');
    expect(first.response.body.toString()).not.toContain('forged');
    expect(await t.effects(`protocol:alice:${fresh}`)).toBe(1);
    // And a replay of the first key with its own body is the fast path's again.
    const replay = await send(keys, key, { amount: 1 });
    expect(replay).toMatchObject({ kind: 'replay', source: 'fast-path' });
    expect(await t.effects(`protocol:alice:${key}`)).toBe(1);
  });

  it("keeps one principal's cached response from another principal with the same key", async () => {
    const keys = keysWith(redisFastPath({ client: redis }));
    const key = randomUUID();
    await send(keys, key, { amount: 1 }, 201, 'alice');
    await eventually(async () => (await redis.get(cacheKey(key, 'alice'))) !== null);
    const bob = await send(keys, key, { amount: 1 }, 201, 'bob');
    expect(bob.kind).toBe('proceed');
    expect(await t.effects(`protocol:bob:${key}`)).toBe(1);
  });

  it('caches only what Postgres stored: not a released 5xx, not a rolled-back transaction, not a key in flight', async () => {
    const keys = keysWith(redisFastPath({ client: redis }));
    const released = randomUUID();
    expect((await send(keys, released, { amount: 1 }, 503)).response.status).toBe(503);
    const failed = randomUUID();
    const decision = await keys.begin(request(failed, { amount: 1 }));
    if (decision.kind !== 'proceed') throw new Error(decision.kind);
    await expect(
      decision.transaction(async (tx) => {
        await tx
          .insertInto('effects')
          .values({ label: `protocol:alice:${failed}` })
          .execute();
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    const inFlight = randomUUID();
    const running = await keys.begin(request(inFlight, { amount: 1 }));
    expect(running.kind).toBe('proceed');
    const conflict = await send(keys, inFlight, { amount: 1 });
    expect(conflict.kind).toBe('conflict');
    // A key that completed after them, written by the same guard: once it is in Redis, the others' writes would be too.
    const done = randomUUID();
    await send(keys, done, { amount: 1 });
    await eventually(async () => (await redis.get(cacheKey(done))) !== null);
    for (const key of [released, failed, inFlight]) expect(await redis.get(cacheKey(key))).toBeNull();
    // Each runs again on its retry (the 5xx and the failure released their key).
    expect((await send(keys, released, { amount: 1 })).kind).toBe('proceed');
    expect((await send(keys, failed, { amount: 1 })).kind).toBe('proceed');
    expect(await t.effects(`protocol:alice:${failed}`)).toBe(1);
    if (running.kind === 'proceed') await running.release();
  });

  it("caches a response for no longer than its key's retention", async () => {
    const retentionMs = 90_000;
    const keys = keysWith(redisFastPath({ client: redis }), { retentionMs, leaseMs: 30_000 });
    const key = randomUUID();
    await send(keys, key, { amount: 1 });
    await eventually(async () => (await redis.get(cacheKey(key))) !== null);
    const ttl = await redis.pTTL(cacheKey(key));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(retentionMs);
    // A replay from Postgres (the cache flushed) writes it again with what is left of the row's retention.
    await redis.del(cacheKey(key));
    await sql`UPDATE ${sql.raw(keys.config.names.qualifiedTable)} SET expires_at = now() + interval '20 seconds'
      WHERE idempotency_key = ${key}`.execute(t.db);
    const replay = await send(keys, key, { amount: 1 });
    expect(replay).toMatchObject({ kind: 'replay', source: undefined });
    await eventually(async () => (await redis.get(cacheKey(key))) !== null);
    expect(await redis.pTTL(cacheKey(key))).toBeLessThanOrEqual(20_000);
  });

  it('does not cache a response larger than fastPathMaxResponseBytes: its replays come from Postgres', async () => {
    const keys = keysWith(redisFastPath({ client: redis }), { fastPathMaxResponseBytes: 1_024 });
    const big = randomUUID();
    const small = randomUUID();
    await send(keys, big, { amount: 1, pad: 'x'.repeat(2_000) });
    await send(keys, small, { amount: 1 });
    await eventually(async () => (await redis.get(cacheKey(small))) !== null);
    expect(await redis.get(cacheKey(big))).toBeNull();
    const replay = await send(keys, big, { amount: 1, pad: 'x'.repeat(2_000) });
    expect(replay).toMatchObject({ kind: 'replay', source: undefined });
    expect(replay.response.body.length).toBeGreaterThan(2_000);
  });

  it('counts each lookup in inboxkit.fast_path by result under scope inboxkit-http: a miss, a hit, a bypass', async () => {
    const recorded = recordingMeterProvider();
    const counted = (result: string) =>
      recorded.value('inboxkit.fast_path', { scope: HTTP_FAST_PATH_SCOPE, result });
    const keys = keysWith(redisFastPath({ client: redis }), { meterProvider: recorded.provider });
    const key = randomUUID();
    expect((await send(keys, key, { amount: 1 })).kind).toBe('proceed');
    expect(counted('miss')).toBe(1);
    await eventually(async () => (await redis.get(cacheKey(key))) !== null);
    expect(await send(keys, key, { amount: 1 })).toMatchObject({ kind: 'replay', source: 'fast-path' });
    expect(counted('hit')).toBe(1);

    // Redis answering after 2 s, the timeout 20 ms: after 10 timeouts in a row the guard leaves Redis alone,
    // and the lookups it does not make are counted as bypassed.
    const { host, port } = requireService('redis');
    const proxy = await slowProxy({ host, port }, 2_000);
    const slow = await connectRedis(proxy.url);
    try {
      const slowed = recordingMeterProvider();
      const slowCounted = (r: string) =>
        slowed.value('inboxkit.fast_path', { scope: HTTP_FAST_PATH_SCOPE, result: r });
      const { logger, warnings } = recordingLogger();
      const slowKeys = keysWith(redisFastPath({ client: slow, timeoutMs: 20 }), {
        meterProvider: slowed.provider,
        logger,
      });
      for (let i = 0; i < 40 && slowCounted('bypassed') === 0; i++) {
        const decision = await slowKeys.begin(request(randomUUID(), { amount: 1 }));
        expect(decision.kind).toBe('proceed');
        if (decision.kind === 'proceed') await decision.release();
      }
      expect(slowCounted('timeout')).toBeGreaterThanOrEqual(10);
      expect(slowCounted('bypassed')).toBeGreaterThanOrEqual(1);
      expect(slowCounted('hit') + slowCounted('miss')).toBe(0);
      // Switching itself off is said once, on the middleware's logger.
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.obj).toMatchObject({ fastPath: 'idempotency keys: fast path', bypassMs: 1_000 });
    } finally {
      slow.destroy();
      await proxy.close();
    }
  });

  it('counts its lookups on the global MeterProvider when given none', async () => {
    const recorded = recordingMeterProvider();
    expect(metrics.setGlobalMeterProvider(recorded.provider)).toBe(true);
    try {
      const keys = keysWith(redisFastPath({ client: redis }));
      expect((await send(keys, randomUUID(), { amount: 1 })).kind).toBe('proceed');
      expect(recorded.value('inboxkit.fast_path', { scope: HTTP_FAST_PATH_SCOPE, result: 'miss' })).toBe(1);
    } finally {
      metrics.disable();
    }
  });

  it('refuses a fastPath that is not one, at start-up', () => {
    expect(() => keysWith({} as FastPath)).toThrow(ConfigurationError);
    expect(() => keysWith({ ...redisFastPath({ client: redis }), timeoutMs: 0 })).toThrow(
      /fastPath.timeoutMs/,
    );
    expect(() => keysWith(redisFastPath({ client: redis }), { fastPathMaxResponseBytes: -1 })).toThrow(
      /fastPathMaxResponseBytes/,
    );
    expect(() => keysWith(redisFastPath({ client: redis }), { logger: 'debug' as never })).toThrow(
      /logger must be an object/,
    );
  });
});
