// `inboxkit forget` in front of a Redis fast path, on real Redis and Postgres with a real consumer: with
// --redis-url the id's fast-path entry is deleted with its row, so the next delivery is processed (the fast
// path answered it `duplicate` before), from the command line and from the console; without it, the output
// says exactly that the fast path may still answer `duplicate`; and when Redis cannot be reached nothing is
// forgotten.

import { randomUUID } from 'node:crypto';
import { idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { redisFastPath } from '@inboxkit/core/redis';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { connectRedis, keysUnder as redisKeysUnder, type TestRedis } from '../../../test/support/redis.js';
import { requireService as sharedService } from '../../../test/support/services.js';
import { startConsoleServer } from '../src/console/console-server.js';
import { openFastPathEntries } from '../src/inbox/fast-path-entries.js';
import { runCli } from '../src/run-cli.js';
import { resolveConnectionSettings } from '../src/settings/connection-settings.js';
import { defaultCliServices } from '../src/transports/default-cli-services.js';
import { captureIo } from './support/capture-io.js';
import { eventually } from './support/eventually.js';
import { inboxDatabase, type InboxDatabase } from './support/inbox-database.js';
import { requireService } from './support/services.js';

let database: InboxDatabase;
let redis: TestRedis;
beforeAll(async () => {
  database = await inboxDatabase();
  redis = await connectRedis();
});
afterAll(async () => {
  await redis?.quit();
  await database?.dispose();
});

const delivery = (id: string): InboundMessage => ({
  id,
  body: JSON.stringify({ id }),
  headers: {},
  source: { transport: 'memory' },
});

/** A consumer with the fast path under `keyPrefix`, one effect row per processed message. */
function consumerWith(keyPrefix: string, name: string) {
  return idempotentConsumer<unknown, Transaction<unknown>>({
    name,
    store: database.store,
    fastPath: redisFastPath({ client: redis, keyPrefix }),
    handler: async (message, { tx }) => {
      await sql`insert into ${sql.table(`${database.schema}.effects`)} (message_id) values (${message.id})`.execute(
        tx,
      );
    },
  });
}

/** Every key under `prefix` (the test's own), through the whole SCAN cursor. */
const keysUnder = (prefix: string): Promise<string[]> => redisKeysUnder(redis, prefix);

async function forget(consumer: string, id: string, extra: string[], env: Record<string, string> = {}) {
  const io = captureIo({ env: { USER: 'forget-test', ...env } });
  const code = await runCli(
    [
      'forget',
      '--consumer',
      consumer,
      '--id',
      id,
      '--reason',
      'reprocess',
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      database.schema,
      ...extra,
    ],
    io.io,
  );
  return { code, out: io.stdout(), err: io.stderr() };
}

describe('forget with a Redis fast path', () => {
  it('deletes the fast-path entry with the row (--redis-url): the next delivery is processed, not answered from Redis', async () => {
    const prefix = `test:forget:${randomUUID()}:`;
    const name = `orders-${randomUUID().slice(0, 8)}`;
    const consumer = consumerWith(prefix, name);
    expect((await consumer.handle(delivery('f-1'))).status).toBe('processed');
    await eventually(
      async () => (await keysUnder(prefix)).length === 1,
      async () => `keys: ${(await keysUnder(prefix)).join(', ')}`,
    );
    expect(await consumer.handle(delivery('f-1'))).toMatchObject({
      status: 'duplicate',
      source: 'fast-path',
    });

    const done = await forget(name, 'f-1', [
      '--redis-url',
      sharedService('redis').url,
      '--fast-path-prefix',
      prefix,
    ]);
    expect(done.err).toBe('');
    expect(done.code).toBe(0);
    expect(done.out).toMatch(
      /its fast-path entry in Redis is deleted too; its next delivery is processed as new/,
    );
    expect(await keysUnder(prefix)).toEqual([]);
    expect(await consumer.handle(delivery('f-1'))).toMatchObject({ status: 'processed' });
    expect((await database.effects()).get('f-1')).toBe(2);
  });

  it('says, without --redis-url, that a fast path may still answer the id duplicate', async () => {
    const name = `orders-${randomUUID().slice(0, 8)}`;
    const consumer = consumerWith(`test:forget:${randomUUID()}:`, name);
    await consumer.handle(delivery('f-2'));
    const done = await forget(name, 'f-2', []);
    expect(done.code).toBe(0);
    expect(done.out).toMatch(
      /unless the consumers use a Redis fast path: pass --redis-url \(or set REDIS_URL\)/,
    );
  });

  it('forgets nothing when the Redis of --redis-url cannot be reached', async () => {
    const name = `orders-${randomUUID().slice(0, 8)}`;
    const consumer = consumerWith(`test:forget:${randomUUID()}:`, name);
    await consumer.handle(delivery('f-3'));
    const refused = await forget(name, 'f-3', ['--redis-url', 'redis://127.0.0.1:1']);
    expect(refused.code).toBe(3);
    expect(refused.err).toMatch(/^inboxkit forget: .*ECONNREFUSED/);
    expect(await database.store.findRows(name, ['f-3'])).toMatchObject([{ status: 'completed' }]);
  });

  it("deletes the fast-path entry from the console's forget too (inboxkit console --redis-url)", async () => {
    const prefix = `test:forget:${randomUUID()}:`;
    const name = `orders-${randomUUID().slice(0, 8)}`;
    const consumer = consumerWith(prefix, name);
    expect((await consumer.handle(delivery('c-1'))).status).toBe('processed');
    await eventually(
      async () => (await keysUnder(prefix)).length === 1,
      async () => 'no entry written',
    );
    const fastPath = await openFastPathEntries({ redisUrl: sharedService('redis').url, keyPrefix: prefix });
    const env = { DATABASE_URL: requireService('DATABASE_URL') };
    const server = await startConsoleServer({
      port: 0,
      dlqs: [],
      services: defaultCliServices(env),
      connection: resolveConnectionSettings({ schema: database.schema }, env),
      db: database.db,
      operator: 'console-test',
      fastPath,
    });
    try {
      const response = await fetch(`${server.url}api/forget`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
        body: JSON.stringify({ consumer: name, id: 'c-1', reason: 'reprocess' }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ kind: 'forgotten', fastPathEntry: 'deleted' });
    } finally {
      await server.close();
      await fastPath.close();
    }
    expect(await keysUnder(prefix)).toEqual([]);
    expect(await consumer.handle(delivery('c-1'))).toMatchObject({ status: 'processed' });
    expect((await database.effects()).get('c-1')).toBe(2);
  });
});
