// The fast path on Redis: one GET before Postgres, one SET with a TTL after a commit, on a client the
// application owns (node-redis or ioredis; inboxkit never connects, quits or configures it). No Redis package
// is imported: the two commands go through the client's raw-command method, whichever it has.

import { DEFAULT_FAST_PATH_TIMEOUT_MS, type FastPath } from '../fast-path.js';

/** node-redis (`createClient()` of `redis` 4 and later): the slice inboxkit uses. */
export interface NodeRedisLike {
  sendCommand(args: string[], options?: { readonly timeout?: number }): Promise<unknown>;
}

/**
 * node-redis' options for the fast path's commands: no per-command timeout. node-redis 5 and later give every
 * command one (5 s by default), an `AbortSignal.timeout` and its timer each, which measured half the CPU of a
 * duplicate answered from Redis (docs/fast-path.md); the fast path bounds its own wait (`timeoutMs`) and the
 * commands it leaves waiting (1,000), so the client's timeout buys it nothing. The application's own commands
 * keep the client's setting.
 */
const NODE_REDIS_COMMAND_OPTIONS = Object.freeze({ timeout: 0 });

/** ioredis (`new Redis()`, `new Redis.Cluster()`): the slice inboxkit uses. */
export interface IoRedisLike {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
}

/** Options of `redisFastPath`. */
export interface RedisFastPathOptions {
  /**
   * A connected node-redis or ioredis client. Configure it not to queue commands while disconnected
   * (node-redis `disableOfflineQueue: true`, ioredis `enableOfflineQueue: false`), so an outage answers at once
   * instead of at the timeout.
   */
  readonly client: NodeRedisLike | IoRedisLike;
  /** Prefix of every key. Default is `inboxkit:fp:`. */
  readonly keyPrefix?: string;
  /** How long a lookup may take before the caller goes to Postgres, in ms. Default is 20 ms. */
  readonly timeoutMs?: number;
}

/**
 * A `FastPath` on Redis for `idempotentConsumer({ fastPath })` and `idempotencyKeys({ fastPath })` (the same
 * client and prefix can serve both). Keys are `<prefix><scope length>:<scope>:<id>`: for a consumer the scope is
 * its name, the id the message id and the value the payload fingerprint, with the dedupe window as TTL; for the
 * HTTP middleware the scope is `inboxkit-http`, the id a hash of the key's principal, method, route and key, the
 * value the stored response, with the key's remaining retention as TTL (`SET … PX`). Redis needs no persistence
 * for it: an eviction, a flush, a failover or an outage only sends work back to Postgres.
 *
 * @example
 * import { createClient } from 'redis';
 * const redis = await createClient({ url: process.env.REDIS_URL, disableOfflineQueue: true }).connect();
 * const billing = idempotentConsumer({ name: 'billing', store, handler, fastPath: redisFastPath({ client: redis }) });
 */
export function redisFastPath(options: RedisFastPathOptions): FastPath {
  const run = commandRunner(options.client);
  const prefix = options.keyPrefix ?? 'inboxkit:fp:';
  const timeoutMs = options.timeoutMs ?? DEFAULT_FAST_PATH_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw new RangeError(`timeoutMs must be positive, got ${String(timeoutMs)}`);
  const key = (scope: string, id: string): string => `${prefix}${scope.length}:${scope}:${id}`;
  return {
    timeoutMs,
    lookup: async (scope, id) => {
      const value = await run(['GET', key(scope, id)]);
      if (value === null || value === undefined) return undefined;
      return typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : undefined;
    },
    remember: async (scope, id, value, ttlMs) => {
      await run(['SET', key(scope, id), value, 'PX', String(Math.max(1, Math.round(ttlMs)))]);
    },
  };
}

function commandRunner(client: NodeRedisLike | IoRedisLike): (args: string[]) => Promise<unknown> {
  const c = client as Partial<NodeRedisLike & IoRedisLike> | null;
  if (c !== null && typeof c === 'object') {
    // ioredis first: its clients have no sendCommand of node-redis' shape (theirs takes a Command object).
    if (typeof c.call === 'function') {
      const io = c as IoRedisLike;
      return (args) => io.call(args[0]!, ...args.slice(1));
    }
    if (typeof c.sendCommand === 'function') {
      const nodeRedis = c as NodeRedisLike;
      return (args) => nodeRedis.sendCommand(args, NODE_REDIS_COMMAND_OPTIONS);
    }
  }
  throw new TypeError(
    'redisFastPath: client must be a node-redis client (sendCommand) or an ioredis client (call)',
  );
}
