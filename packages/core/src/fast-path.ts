// The fast path: a cache of completed work (Redis, say) consulted before Postgres, so a storm of duplicates is
// answered without a Postgres round trip. The database stays the authority: the cache only ever says "this
// completed, and here is what it recorded" (a consumer's payload fingerprint; the HTTP middleware's stored
// response); a miss, an error, a timeout or another fingerprint goes to Postgres. An eviction, a flush or an
// outage of the cache costs speed, never correctness.

import { createHash } from 'node:crypto';
import { ConfigurationError } from './errors.js';

/**
 * A cache of completed work keyed by (scope, id), each entry a string with a TTL. A consumer keeps, under its
 * name, each completed message id's payload fingerprint; the HTTP middleware (`idempotencyKeys({ fastPath })`)
 * keeps stored responses under its own scope. `redisFastPath()` from `@inboxkit/core/redis` is one; any store
 * with a TTL can be. Both methods may reject or hang: callers bound them with `timeoutMs` and fall through to
 * Postgres.
 *
 * @example
 * const fastPath: FastPath = {
 *   lookup: async (scope, id) => (await cache.get(`${scope}:${id}`)) ?? undefined,
 *   remember: async (scope, id, value, ttlMs) => void (await cache.set(`${scope}:${id}`, value, ttlMs)),
 * };
 */
export interface FastPath {
  /** The value recorded for (scope, id), or undefined when none is known. */
  lookup(scope: string, id: string): Promise<string | undefined>;
  /** Records `value` for (scope, id), for `ttlMs` (a consumer's dedupe window, an HTTP key's remaining retention). */
  remember(scope: string, id: string, value: string, ttlMs: number): Promise<void>;
  /**
   * Deletes what is recorded for (scope, id), for operators (`inboxkit forget`): the next lookup misses.
   * Optional; `redisFastPath()` has it.
   */
  forget?(scope: string, id: string): Promise<void>;
  /** How long a caller waits for a lookup before going to Postgres, in ms. Default is 20 ms. */
  readonly timeoutMs?: number;
}

/**
 * The scope a cache entry lives under: `name` (a consumer's name, the HTTP middleware's `inboxkit-http`) inside
 * its authority — `identity` names the table that answers for it (`InboxStore#identity()`: database, schema,
 * table), hashed to 22 characters (128 bits). Two inboxes on one cache then never read each other's entries,
 * whatever their consumers are called. `<tag>/<name>`.
 *
 * @example
 * fastPathScope(await store.identity!(), 'billing'); // 'q3Vw…/billing'
 */
export function fastPathScope(identity: string, name: string): string {
  const tag = createHash('sha256').update(identity).digest('base64url').slice(0, 22);
  return `${tag}/${name}`;
}

/** Default of `FastPath.timeoutMs`. */
export const DEFAULT_FAST_PATH_TIMEOUT_MS = 20;

/**
 * What a lookup said: `hit` answers from the cache (a consumer's `duplicate`, an HTTP replay); every other result
 * goes to Postgres. `skipped`: not looked up, because almost nothing has hit lately (see `FastPathGuard`);
 * `bypassed`: the cache failed repeatedly or is stalled, and is left alone for a moment.
 */
export type FastPathResult = 'hit' | 'miss' | 'mismatch' | 'error' | 'timeout' | 'bypassed' | 'skipped';

/**
 * Checks a `fastPath` option at start-up: an object with `lookup` and `remember`, and a positive `timeoutMs` if
 * it has one. Throws a `ConfigurationError` naming `option`. Used by `idempotentConsumer` and `idempotencyKeys`.
 *
 * @example
 * checkFastPath(config.fastPath); // throws ConfigurationError('fastPath must be a FastPath …') for `{}`
 */
export function checkFastPath(value: unknown, option = 'fastPath'): asserts value is FastPath | undefined {
  if (value === undefined) return;
  const fastPath = value as Record<string, unknown> | null;
  if (
    typeof fastPath !== 'object' ||
    fastPath === null ||
    typeof fastPath['lookup'] !== 'function' ||
    typeof fastPath['remember'] !== 'function'
  ) {
    throw new ConfigurationError(
      `${option} must be a FastPath with lookup() and remember(): pass redisFastPath({ client }) from @inboxkit/core/redis`,
    );
  }
  const timeoutMs = fastPath['timeoutMs'];
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0)
  ) {
    throw new ConfigurationError(
      `${option}.timeoutMs must be a positive number of milliseconds, got ${typeof timeoutMs === 'number' ? timeoutMs : typeof timeoutMs}`,
    );
  }
}
