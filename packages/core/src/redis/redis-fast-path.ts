// The fast path on Redis: one GET before Postgres, one SET with a TTL after a commit, on a client the
// application owns (node-redis or ioredis; inboxkit never connects, quits or configures it). No Redis package
// is imported: the two commands go through the client's raw-command method, whichever it has.

import { createHmac, timingSafeEqual } from 'node:crypto';
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
  /**
   * A secret (16 bytes or more; 32 random bytes is right) with which every entry is signed: an HMAC-SHA256 of
   * its key and value is stored with it, and an entry whose HMAC does not verify is a miss (the delivery goes to
   * Postgres). Whoever can write to Redis but does not hold the secret then cannot make a message be skipped or
   * a response be replayed by planting an entry, or by copying one under another key. Every process sharing
   * the entries needs the same secret; changing it turns the entries written before into misses. Without it,
   * Redis is inside the trust boundary: whoever can write to it can suppress messages (docs/fast-path.md).
   * Default is none.
   */
  readonly secret?: string | Uint8Array;
}

/** Bytes of the HMAC kept with each entry, written as base64url (43 characters) and a `.`. */
const MAC_CHARS = 43;

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
  const secret = options.secret === undefined ? undefined : Buffer.from(options.secret);
  if (secret !== undefined && secret.length < 16)
    throw new RangeError(`secret must be 16 bytes or more, got ${secret.length}`);
  const mac = (k: string, value: string): Buffer =>
    createHmac('sha256', secret!).update(k).update('\u0000').update(value).digest();
  return {
    timeoutMs,
    lookup: async (scope, id) => {
      const k = key(scope, id);
      const found = await run(['GET', k]);
      if (found === null || found === undefined) return undefined;
      const value =
        typeof found === 'string' ? found : Buffer.isBuffer(found) ? found.toString('utf8') : undefined;
      if (value === undefined || secret === undefined) return value;
      // `<43 characters of base64url HMAC>.<value>`; anything else, or an HMAC of another key or value, is no entry.
      if (value.length <= MAC_CHARS || value[MAC_CHARS] !== '.') return undefined;
      const given = Buffer.from(value.slice(0, MAC_CHARS), 'base64url');
      const entry = value.slice(MAC_CHARS + 1);
      const expected = mac(k, entry);
      return given.length === expected.length && timingSafeEqual(given, expected) ? entry : undefined;
    },
    remember: async (scope, id, value, ttlMs) => {
      const k = key(scope, id);
      const stored = secret === undefined ? value : `${mac(k, value).toString('base64url')}.${value}`;
      await run(['SET', k, stored, 'PX', String(Math.max(1, Math.round(ttlMs)))]);
    },
    forget: async (scope, id) => {
      await run(['DEL', key(scope, id)]);
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
