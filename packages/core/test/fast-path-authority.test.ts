// The fast path's entries belong to one inbox and say so: on real Redis shared by two real Postgres inboxes
// (two schemas), a consumer never answers from the other inbox's entry, and with a secret an entry planted or
// copied by whoever can write to Redis is not believed — the delivery goes to the inbox, which processes it.

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { redisFastPath, type RedisFastPathOptions } from '../src/redis/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';
import { connectRedis } from '../../../test/support/redis.js';

const delivery = (id: string, body: unknown = { id }): InboundMessage => ({
  id,
  body: JSON.stringify(body),
  headers: {},
  source: { transport: 'memory' },
});

async function eventually(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await sleep(10);
  }
}

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
  const keysUnder = async (prefix: string): Promise<string[]> => {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = (await redis.sendCommand(['SCAN', cursor, 'MATCH', `${prefix}*`, 'COUNT', '1000'])) as [string, string[]];
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
    return found;
  };

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
    expect(await consumer.handle(delivery('genuine', payload))).toMatchObject({ status: 'duplicate', source: 'fast-path' });
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
});
