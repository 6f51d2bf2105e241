// The fast path's side of `forget`: after an inbox row is forgotten, its Redis entry must go too, or Redis keeps
// answering the id's deliveries `duplicate` for the rest of the dedupe window. The key is the consumers' own
// (`redisFastPath`): the prefix, the consumer's name inside the inbox's identity, the message id.

import { ConfigurationError, fastPathScope, type FastPath } from '@inboxkit/core';
import { redisFastPath } from '@inboxkit/core/redis';
import type { createClient as CreateClient } from 'redis';

/** Where the consumers' fast path is: `--redis-url` (env `REDIS_URL`), `--fast-path-prefix` (env `INBOXKIT_FAST_PATH_PREFIX`). */
export interface FastPathSettings {
  readonly redisUrl: string;
  /** The consumers' `keyPrefix`. Default is `inboxkit:fp:` (redisFastPath's). */
  readonly keyPrefix: string;
}

/** A connection to the fast path's Redis that deletes entries of the inbox's consumers. */
export interface FastPathEntries {
  /** Deletes `consumer`'s entry for `messageId` in the inbox whose identity is `identity` (`InboxStore#identity()`). */
  forget(identity: string, consumer: string, messageId: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Connects to the fast path's Redis (node-redis, an optional peer: `npm install redis`), failing at once when
 * it cannot: nothing is forgotten in the inbox before Redis is known to be reachable.
 *
 * @example
 * const entries = await openFastPathEntries({ redisUrl: 'redis://localhost:6379', keyPrefix: 'inboxkit:fp:' });
 * await entries.forget(await store.identity(), 'orders', 'o-1');
 * await entries.close();
 */
export async function openFastPathEntries(settings: FastPathSettings): Promise<FastPathEntries> {
  let createClient: typeof CreateClient;
  try {
    ({ createClient } = await import('redis'));
  } catch (error) {
    throw new ConfigurationError('--redis-url needs the node-redis package: npm install redis', {
      cause: error,
    });
  }
  const client = createClient({
    url: settings.redisUrl,
    disableOfflineQueue: true,
    socket: { connectTimeout: 5_000, reconnectStrategy: false },
  });
  client.on('error', () => undefined); // connect() and each command reject with it
  await client.connect();
  const fastPath: FastPath = redisFastPath({ client, keyPrefix: settings.keyPrefix });
  return {
    async forget(identity, consumer, messageId) {
      await fastPath.forget!(fastPathScope(identity, consumer), messageId);
    },
    async close() {
      await client.quit().catch(() => client.destroy());
    },
  };
}
