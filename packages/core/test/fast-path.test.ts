// The fast path on real Redis in front of the real Postgres inbox: a duplicate of a completed delivery is
// answered from Redis without a claim; everything else — a miss, another payload, a replay, a delivery that
// failed — goes to the inbox; a slow Redis costs at most the timeout; and Redis SIGKILLed, restarted and
// flushed mid-run loses nothing and applies nothing twice.

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { MeterProvider } from '@opentelemetry/api';
import { Redis as IoRedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fastPathScope } from '../src/fast-path.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import type { Outcome } from '../src/outcome.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { redisFastPath } from '../src/redis/index.js';
import type { InboxStore } from '../src/store.js';
import { requireService } from '../../../test/support/services.js';
import {
  countEffects,
  insertEffect,
  openTestDatabase,
  type TestDatabase,
  type TestTx,
} from './support/postgres.js';
import { recordingMeterProvider } from '../../../test/support/recording-meter-provider.js';
import { connectRedis, slowProxy, startPrivateRedis } from '../../../test/support/redis.js';
import { eventually } from '../../../test/support/eventually.js';

const delivery = (
  id: string,
  body: unknown = { id },
  extra: Partial<InboundMessage> = {},
): InboundMessage => ({
  id,
  body: JSON.stringify(body),
  headers: {},
  source: { transport: 'memory' },
  ...extra,
});

/** The real store, with a count of the claims that reached it. */
function countingStore(store: InboxStore<TestTx>): {
  store: InboxStore<TestTx>;
  claims: () => number;
} {
  let claims = 0;
  const counted = new Set(['runTransactional', 'runTransactionalBatch', 'claimLease', 'findRows']);
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (counted.has(String(property))) claims += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, claims: () => claims };
}

describe('the fast path', () => {
  let t: TestDatabase;
  let redis: Awaited<ReturnType<typeof connectRedis>>;
  /** The inbox's identity, which every key names (InboxStore#identity). */
  let identity: string;
  beforeAll(async () => {
    t = await openTestDatabase('fast_path', 24);
    redis = await connectRedis();
    identity = await new PostgresInboxStore({ db: t.db, schema: t.schema }).identity();
  });
  afterAll(async () => {
    await redis?.quit();
    await t?.close();
  });

  const consumerWith = (
    name: string,
    fastPath: ReturnType<typeof redisFastPath>,
    meterProvider?: MeterProvider,
  ) => {
    const counting = countingStore(new PostgresInboxStore({ db: t.db, schema: t.schema }));
    const consumer = idempotentConsumer<unknown, TestTx>({
      name,
      store: counting.store,
      fastPath,
      backoff: { initialDelayMs: 1, jitter: 'none' },
      ...(meterProvider ? { meterProvider } : {}),
      handler: async (m, { tx }) => {
        if ((m.payload as { fail?: boolean }).fail) throw new Error('not yet');
        await insertEffect(tx, t.schema, name, m.id);
      },
    });
    return { consumer, claims: counting.claims };
  };
  const keyOf = (name: string, id: string) => {
    const scope = fastPathScope(identity, name);
    return `inboxkit:fp:${scope.length}:${scope}:${id}`;
  };
  const cached = (name: string, id: string) => redis.get(keyOf(name, id));

  it('answers a duplicate of a completed delivery from Redis, without a claim, and says so', async () => {
    const name = `fp-hit-${randomUUID().slice(0, 8)}`;
    const metrics = recordingMeterProvider();
    const { consumer, claims } = consumerWith(name, redisFastPath({ client: redis }), metrics.provider);
    expect((await consumer.handle(delivery('a'))).status).toBe('processed');
    await eventually(async () => (await cached(name, 'a')) !== null);
    const ttl = await redis.pTTL(keyOf(name, 'a'));
    expect(ttl).toBeGreaterThan(6 * 86_400_000); // the dedupe window (7 days)
    const before = claims();
    const outcome = await consumer.handle(delivery('a'));
    expect(outcome).toEqual({
      status: 'duplicate',
      messageId: 'a',
      reason: 'completed',
      source: 'fast-path',
    });
    expect(claims()).toBe(before);
    expect(metrics.value('inboxkit.fast_path', { consumer: name, result: 'hit' })).toBe(1);
    expect(
      metrics.value('inboxkit.duplicates_suppressed', {
        consumer: name,
        reason: 'completed',
        source: 'fast-path',
      }),
    ).toBe(1);
    expect(await countEffects(t.db, t.schema, name)).toBe(1);
  });

  it('sends another payload under a known id to the inbox, which dead-letters it as payload-mismatch', async () => {
    const name = `fp-mismatch-${randomUUID().slice(0, 8)}`;
    const { consumer, claims } = consumerWith(name, redisFastPath({ client: redis }));
    await consumer.handle(delivery('b', { amount: 1 }));
    await eventually(async () => (await cached(name, 'b')) !== null);
    const before = claims();
    const outcome = await consumer.handle(delivery('b', { amount: 2 }));
    expect(outcome.status === 'dead-letter' && outcome.reason).toBe('payload-mismatch');
    expect(claims()).toBeGreaterThan(before);
  });

  it('sends replays and deliveries that have not completed to the inbox', async () => {
    const name = `fp-states-${randomUUID().slice(0, 8)}`;
    const { consumer, claims } = consumerWith(name, redisFastPath({ client: redis }));
    // A failed attempt is not completed: nothing is cached, the retry goes to the inbox and is processed.
    expect((await consumer.handle(delivery('c', { fail: true }))).status).toBe('retry');
    await sleep(50);
    expect(await cached(name, 'c')).toBeNull();
    // A replay of a completed id goes to the inbox too (its audit is written there).
    await consumer.handle(delivery('d'));
    await eventually(async () => (await cached(name, 'd')) !== null);
    const before = claims();
    const replay = await consumer.handle(delivery('d', { id: 'd' }, { replay: { replayId: 'r-1' } }));
    expect(replay).toMatchObject({ status: 'duplicate', reason: 'replay-of-completed' });
    expect(replay).not.toHaveProperty('source');
    expect(claims()).toBeGreaterThan(before);
  });

  it('warms the cache from the inbox: a duplicate the inbox answered is the next one Redis answers', async () => {
    const name = `fp-warm-${randomUUID().slice(0, 8)}`;
    const { consumer } = consumerWith(name, redisFastPath({ client: redis }));
    await consumer.handle(delivery('e'));
    await eventually(async () => (await cached(name, 'e')) !== null);
    await redis.del(keyOf(name, 'e')); // evicted
    expect(await consumer.handle(delivery('e'))).not.toHaveProperty('source');
    await eventually(async () => (await cached(name, 'e')) !== null);
    expect(await consumer.handle(delivery('e'))).toMatchObject({ source: 'fast-path' });
  });

  it('looks up one delivery in 16 while nothing hits, and every delivery again once duplicates come', async () => {
    const name = `fp-adaptive-${randomUUID().slice(0, 8)}`;
    const metrics = recordingMeterProvider();
    const { consumer, claims } = consumerWith(name, redisFastPath({ client: redis }), metrics.provider);
    const result = (r: string) => metrics.value('inboxkit.fast_path', { consumer: name, result: r });
    for (let i = 0; i < 200; i++) await consumer.handle(delivery(`new-${i}`));
    // First deliveries only: after the hit rate fell, most were not looked up at all.
    expect(result('skipped')).toBeGreaterThan(100);
    expect(result('miss')).toBeLessThan(100);
    await eventually(async () => (await cached(name, 'new-199')) !== null);
    // A storm of duplicates: the sampled lookups hit, and lookups resume for every delivery.
    const claimsBefore = claims();
    for (let i = 0; i < 200; i++) await consumer.handle(delivery(`new-${i}`));
    expect(result('hit')).toBeGreaterThan(150);
    expect(claims() - claimsBefore).toBeLessThan(50);
    expect(await countEffects(t.db, t.schema, name)).toBe(200);
  });

  it("sends its commands without node-redis' per-command timeout: the guard bounds the wait", async () => {
    const options: unknown[] = [];
    const recording = {
      sendCommand: (args: string[], given?: { readonly timeout?: number }) => {
        options.push(given);
        return redis.sendCommand(args, given);
      },
    };
    const cache = redisFastPath({ client: recording });
    const id = randomUUID();
    await cache.remember('fp-options', id, 'fingerprint', 60_000);
    expect(await cache.lookup('fp-options', id)).toBe('fingerprint');
    // node-redis 5+ would otherwise give each command a 5 s AbortSignal.timeout and its timer.
    expect(options).toEqual([{ timeout: 0 }, { timeout: 0 }]);
  });

  it('works with an ioredis client too', async () => {
    const io = new IoRedis(requireService('redis').url, { enableOfflineQueue: false, lazyConnect: true });
    io.on('error', () => undefined);
    await io.connect();
    try {
      const name = `fp-ioredis-${randomUUID().slice(0, 8)}`;
      const { consumer } = consumerWith(name, redisFastPath({ client: io }));
      await consumer.handle(delivery('f'));
      await eventually(async () => (await io.get(keyOf(name, 'f'))) !== null);
      expect(await consumer.handle(delivery('f'))).toMatchObject({
        status: 'duplicate',
        source: 'fast-path',
      });
    } finally {
      io.disconnect();
    }
  });

  it('does not slow a delivery beyond the timeout when Redis answers slowly', async () => {
    const { host, port } = requireService('redis');
    const proxy = await slowProxy({ host, port }, 2_000);
    const slow = await connectRedis(proxy.url);
    try {
      const name = `fp-slow-${randomUUID().slice(0, 8)}`;
      const metrics = recordingMeterProvider();
      const { consumer } = consumerWith(
        name,
        redisFastPath({ client: slow, timeoutMs: 20 }),
        metrics.provider,
      );
      await consumer.handle(delivery('g'));
      const slowest: number[] = [];
      for (let i = 0; i < 8; i++) {
        const started = performance.now();
        const outcome = await consumer.handle(delivery(i % 2 === 0 ? 'g' : `g-${i}`));
        slowest.push(performance.now() - started);
        expect(['processed', 'duplicate']).toContain(outcome.status);
      }
      // Each delivery waited at most the 20 ms timeout for Redis, never its 2 s: the inbox answered.
      expect(Math.max(...slowest)).toBeLessThan(1_000);
      expect(
        metrics.value('inboxkit.fast_path', { consumer: name, result: 'timeout' }) +
          metrics.value('inboxkit.fast_path', { consumer: name, result: 'bypassed' }),
      ).toBe(9);
      expect(await countEffects(t.db, t.schema, name)).toBe(5);
    } finally {
      slow.destroy();
      await proxy.close();
    }
  });

  it('applies every message exactly once while Redis is SIGKILLed, restarted and flushed mid-run', async () => {
    const server = await startPrivateRedis();
    const client = await connectRedis(server.url);
    try {
      const name = `fp-chaos-${randomUUID().slice(0, 8)}`;
      const metrics = recordingMeterProvider();
      // A generous timeout: this test is about correctness on a shared, busy machine, not speed.
      const { consumer } = consumerWith(name, redisFastPath({ client, timeoutMs: 200 }), metrics.provider);
      const ids = Array.from({ length: 150 }, (_, i) => `m-${i}`);
      // Each id five times, 16 at a time: new ids all through the run (so some first deliveries meet Redis
      // down, restarted empty, flushed), each followed later by its duplicates.
      const queue = ids.flatMap((_, k) =>
        [0, 10, 20, 30, 40].filter((lag) => k >= lag).map((lag) => ids[k - lag]!),
      );
      for (let k = ids.length - 40; k < ids.length; k++)
        for (const lag of [10, 20, 30, 40]) if (k + lag >= ids.length) queue.push(ids[k]!);
      const outcomes = new Map<string, Outcome[]>();
      let next = 0;
      const chaos = async (at: number): Promise<void> => {
        if (at === 180) await server.kill();
        if (at === 370) await server.start();
        if (at === 560) await client.flushAll().catch(() => undefined);
      };
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < queue.length) {
            const i = next++;
            await chaos(i);
            const id = queue[i]!;
            let outcome = await consumer.handle(delivery(id));
            // A retry is redelivered, as a broker would.
            while (outcome.status === 'retry') outcome = await consumer.handle(delivery(id));
            outcomes.set(id, [...(outcomes.get(id) ?? []), outcome]);
          }
        }),
      );
      // 0 lost: every id processed exactly once; 0 double effects.
      for (const id of ids) {
        expect(outcomes.get(id)!.filter((o) => o.status === 'processed')).toHaveLength(1);
        expect(outcomes.get(id)!.filter((o) => o.status === 'duplicate')).toHaveLength(4);
        expect(await countEffects(t.db, t.schema, name, id)).toBe(1);
      }
      // The run went through all three: hits before the kill and after the restart, failures while down.
      const result = (r: string) => metrics.value('inboxkit.fast_path', { consumer: name, result: r });
      expect(result('hit')).toBeGreaterThan(0);
      expect(result('error') + result('timeout') + result('bypassed')).toBeGreaterThan(0);
    } finally {
      await client.quit().catch(() => undefined);
      await server.stop();
    }
  });
});
