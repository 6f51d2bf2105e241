// Knex and TypeORM send their own BEGIN; with pipelining (the default) the store's claim rides in the same round
// trip. A claim that fails there (a lock timeout behind a concurrent delivery of the same id) must leave the
// library's connection out of the aborted transaction before the pool hands it out again; and with pipelining
// 'off' the adapters still pass the store conformance suite.

import { idempotentConsumer } from '@inboxkit/core';
import knexFactory, { type Knex } from 'knex';
import { DataSource, type EntityManager } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeInboxStoreConformance } from '../../testing/src/store-conformance.js';
import { knexInboxStore } from '../src/knex/index.js';
import { typeormInboxStore } from '../src/typeorm/index.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('pipelining');
});
afterAll(async () => {
  await t?.close();
});

/** A library over a pool of `size` connections. */
interface Library<Tx> {
  readonly store: ReturnType<typeof knexInboxStore> | ReturnType<typeof typeormInboxStore>;
  applyEffect(tx: Tx, consumer: string, messageId: string): Promise<void>;
  close(): Promise<void>;
}

const LIBRARIES = {
  knex: async (pipelining: 'auto' | 'off', size: number): Promise<Library<Knex.Transaction>> => {
    const knex = knexFactory({ client: 'pg', connection: t.url, pool: { min: 0, max: size } });
    return {
      store: knexInboxStore({ knex, schema: t.schema, pipelining }),
      applyEffect: async (trx, consumer, messageId) => {
        await trx.withSchema(t.schema).insert({ consumer, message_id: messageId }).into('effects');
      },
      close: () => knex.destroy(),
    };
  },
  typeorm: async (pipelining: 'auto' | 'off', size: number): Promise<Library<EntityManager>> => {
    const dataSource = await new DataSource({ type: 'postgres', url: t.url, poolSize: size }).initialize();
    return {
      store: typeormInboxStore({ dataSource, schema: t.schema, pipelining }),
      applyEffect: async (manager, consumer, messageId) => {
        await manager.query(`INSERT INTO "${t.schema}".effects (consumer, message_id) VALUES ($1, $2)`, [
          consumer,
          messageId,
        ]);
      },
      close: () => dataSource.destroy(),
    };
  },
};

describe.each(['knex', 'typeorm'] as const)('%s: the claim sent with the library BEGIN', (name) => {
  it('fails the claim with the lock timeout and leaves the connection clean for the next delivery', async () => {
    // One connection: the delivery after the failed claim gets the same one.
    const library = (await LIBRARIES[name]('auto', 1)) as Library<object>;
    const consumerName = `pipelined-${name}`;
    const consumer = idempotentConsumer<unknown, object>({
      name: consumerName,
      store: library.store as never,
      lockTimeoutMs: 200,
      handler: async (message, { tx }) => library.applyEffect(tx, consumerName, message.id),
    });
    const message = (id: string) => ({ id, body: '{}', headers: {}, source: { transport: 'test' } });
    const holder = await t.pool.connect();
    try {
      // Another delivery of `held` is in flight: its uncommitted row blocks the claim past the lock timeout.
      await holder.query('BEGIN');
      await holder.query(
        `INSERT INTO "${t.schema}".inbox (consumer, message_id, status, attempts, changed_at, expires_at)
         VALUES ($1, 'held', 'completed', 1, now(), now() + interval '1 day')`,
        [consumerName],
      );
      const blocked = await consumer.handle(message('held'));
      expect(blocked.status).toBe('retry');
      // The one connection goes on: not left inside the aborted transaction of the failed claim.
      const next = await consumer.handle(message('next'));
      expect(next.status).toBe('processed');
      expect(await countEffects(t.pool, t.schema, consumerName, 'next')).toBe(1);
      // Once the other delivery rolled back, the held id is claimed and applied once.
      await holder.query('ROLLBACK');
      expect((await consumer.handle(message('held'))).status).toBe('processed');
      expect(await countEffects(t.pool, t.schema, consumerName, 'held')).toBe(1);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
      await library.close();
    }
  });
});

describeInboxStoreConformance<Knex.Transaction>("Knex, pipelining: 'off'", async () => {
  const library = await LIBRARIES.knex('off', 5);
  return {
    store: library.store as ReturnType<typeof knexInboxStore>,
    applyEffect: (trx, consumer, messageId) => library.applyEffect(trx, consumer, messageId),
    countEffects: (consumer, messageId) => countEffects(t.pool, t.schema, consumer, messageId),
    sendStatement: (trx, sql) => trx.raw(sql),
    close: () => library.close(),
  };
});
