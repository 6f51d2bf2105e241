// The fast path's entries belong to one inbox and say so: on real Redis shared by two real Postgres inboxes
// (two schemas), a consumer never answers from the other inbox's entry, and with a secret an entry planted or
// copied by whoever can write to Redis is not believed — the delivery goes to the inbox, which processes it.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import type { InboxStore } from '../src/store.js';
import { redisFastPath, type RedisFastPathOptions } from '../src/redis/index.js';
import {
  countEffects,
  insertEffect,
  openTestDatabase,
  type TestDatabase,
  type TestTx,
} from './support/postgres.js';
import { connectRedis, keysUnder as redisKeysUnder } from '../../../test/support/redis.js';
import { eventually } from '../../../test/support/eventually.js';

const delivery = (id: string, body: unknown = { id }): InboundMessage => ({
  id,
  body: JSON.stringify(body),
  headers: {},
  source: { transport: 'memory' },
});

describe('fast-path entries belong to their inbox', () => {
  let a: TestDatabase;
  let b: TestDatabase;
  let redis: Awaited<ReturnType<typeof connectRedis>>;
  beforeAll(async () => {
    a = await openTestDatabase('fp_authority_a', 4);
    b = await openTestDatabase('fp_authority_b', 4);
    redis = await connectRedis();
  });
  afterAll(async () => {
    await redis?.quit();
    await a?.close();
    await b?.close();
  });

  const consumerOn = (t: TestDatabase, name: string, options: Omit<RedisFastPathOptions, 'client'>) =>
    idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      fastPath: redisFastPath({ client: redis, ...options }),
      handler: async (m, { tx }) => insertEffect(tx, t.schema, name, m.id),
    });
  /** Every key under `prefix` (the test's own), as the consumer wrote them. */
  const keysUnder = (prefix: string): Promise<string[]> => redisKeysUnder(redis, prefix);

  it("processes B's delivery in B's inbox when inbox A on the same Redis completed the same id under the same consumer name", async () => {
    const keyPrefix = `test:fp-authority:${randomUUID()}:`;
    const name = 'notifications';
    const onA = consumerOn(a, name, { keyPrefix });
    const onB = consumerOn(b, name, { keyPrefix });
    expect((await onA.handle(delivery('evt-42'))).status).toBe('processed');
    await eventually(async () => (await keysUnder(keyPrefix)).length === 1);
    // B never saw evt-42: its inbox has no row, so it must run B's handler.
    expect(await onB.handle(delivery('evt-42'))).toMatchObject({ status: 'processed' });
    expect(await countEffects(b.db, b.schema, name, 'evt-42')).toBe(1);
    // Each inbox's entry is its own, and each answers its own duplicates from Redis.
    await eventually(async () => (await keysUnder(keyPrefix)).length === 2);
    expect(await onA.handle(delivery('evt-42'))).toMatchObject({ status: 'duplicate', source: 'fast-path' });
    expect(await onB.handle(delivery('evt-42'))).toMatchObject({ status: 'duplicate', source: 'fast-path' });
    expect(await countEffects(a.db, a.schema, name, 'evt-42')).toBe(1);
    expect(await countEffects(b.db, b.schema, name, 'evt-42')).toBe(1);
  });

  it('with a secret, believes no entry planted or copied under another id: the message is processed', async () => {
    const keyPrefix = `test:fp-planted:${randomUUID()}:`;
    const name = `planted-${randomUUID().slice(0, 8)}`;
    const consumer = consumerOn(a, name, { keyPrefix, secret: 'a secret of thirty-two bytes or more!' });
    const payload = { amount: 5 };
    expect((await consumer.handle(delivery('genuine', payload))).status).toBe('processed');
    await eventually(async () => (await keysUnder(keyPrefix)).length === 1);
    const [genuineKey] = await keysUnder(keyPrefix);
    const genuine = (await redis.get(genuineKey!))!;
    expect(await consumer.handle(delivery('genuine', payload))).toMatchObject({
      status: 'duplicate',
      source: 'fast-path',
    });
    // A neighbour with write access to Redis copies the genuine entry under an id that never ran (same payload).
    const copiedKey = `${genuineKey!.slice(0, -'genuine'.length)}never-run`;
    await redis.sendCommand(['SET', copiedKey, genuine]);
    expect(await consumer.handle(delivery('never-run', payload))).toMatchObject({ status: 'processed' });
    expect(await countEffects(a.db, a.schema, name, 'never-run')).toBe(1);
    // …or plants the bare fingerprint an entry without a secret would hold.
    const plantedKey = `${genuineKey!.slice(0, -'genuine'.length)}also-never-run`;
    await redis.sendCommand(['SET', plantedKey, genuine.slice(genuine.indexOf('.') + 1)]);
    expect(await consumer.handle(delivery('also-never-run', payload))).toMatchObject({ status: 'processed' });
    expect(await countEffects(a.db, a.schema, name, 'also-never-run')).toBe(1);
  });

  /** The Postgres store of `t` with its identity() replaced (undefined: a store that has none). */
  const storeWithIdentity = (
    t: TestDatabase,
    identity: (() => Promise<string>) | undefined,
  ): InboxStore<TestTx> => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    return new Proxy(store, {
      get: (target, property) => {
        if (property === 'identity') return identity;
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  const consumerOver = (store: InboxStore<TestTx>, t: TestDatabase, name: string, keyPrefix: string) =>
    idempotentConsumer<unknown, TestTx>({
      name,
      store,
      fastPath: redisFastPath({ client: redis, keyPrefix }),
      handler: async (m, { tx }) => insertEffect(tx, t.schema, name, m.id),
    });

  it('keeps the entries of a store that cannot say its identity to the consumer that wrote them', async () => {
    const keyPrefix = `test:fp-unidentified:${randomUUID()}:`;
    const name = `unidentified-${randomUUID().slice(0, 8)}`;
    const store = storeWithIdentity(a, undefined);
    const first = consumerOver(store, a, name, keyPrefix);
    expect((await first.handle(delivery('u-1'))).status).toBe('processed');
    await eventually(async () => (await keysUnder(keyPrefix)).length === 1);
    expect(await first.handle(delivery('u-1'))).toMatchObject({ status: 'duplicate', source: 'fast-path' });
    // Another process (here: another consumer) cannot know the entry is this inbox's: the inbox answers it.
    const second = consumerOver(store, a, name, keyPrefix);
    const answer = await second.handle(delivery('u-1'));
    expect(answer).toMatchObject({ status: 'duplicate' });
    expect(answer).not.toHaveProperty('source');
  });

  it('sends deliveries to the inbox while the identity cannot be read, and uses the fast path once it can', async () => {
    const keyPrefix = `test:fp-identity-down:${randomUUID()}:`;
    const name = `identity-down-${randomUUID().slice(0, 8)}`;
    const real = new PostgresInboxStore({ db: a.db, schema: a.schema });
    let down = true;
    const store = storeWithIdentity(a, () =>
      down ? Promise.reject(new Error('connection refused')) : real.identity(),
    );
    const consumer = consumerOver(store, a, name, keyPrefix);
    expect((await consumer.handle(delivery('d-1'))).status).toBe('processed');
    const duplicate = await consumer.handle(delivery('d-1'));
    expect(duplicate).toMatchObject({ status: 'duplicate' });
    expect(duplicate).not.toHaveProperty('source');
    expect(await keysUnder(keyPrefix)).toEqual([]);
    down = false;
    // Read again after a second (no timed assertion: poll until the fast path answers).
    await eventually(async () => {
      const outcome = await consumer.handle(delivery('d-1'));
      return 'source' in outcome && outcome.source === 'fast-path';
    }, 10_000);
    expect(await countEffects(a.db, a.schema, name, 'd-1')).toBe(1);
  });

  it('refuses a secret shorter than 16 bytes', () => {
    expect(() => redisFastPath({ client: redis, secret: 'short' })).toThrow(
      /secret must be 16 bytes or more/,
    );
  });
});
