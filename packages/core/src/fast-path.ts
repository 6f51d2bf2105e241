// The fast path: a cache of completed deliveries (Redis, say) consulted before the inbox claim, so a storm of
// duplicates is answered without a Postgres round trip. The inbox stays the authority: the cache only ever
// says "completed with this fingerprint"; a miss, an error, a timeout or another fingerprint goes to Postgres.
// An eviction, a flush or an outage of the cache costs speed, never correctness.

/**
 * A cache of completed deliveries keyed by (consumer, message id). `redisFastPath()` from
 * `@inboxkit/core/redis` is one; any store with a TTL can be. Both methods may reject or hang: the consumer
 * bounds them with `timeoutMs` and falls through to the inbox.
 *
 * @example
 * const fastPath: FastPath = {
 *   lookup: async (consumer, id) => (await cache.get(`${consumer}:${id}`)) ?? undefined,
 *   remember: async (consumer, id, fingerprint, ttlMs) => void (await cache.set(`${consumer}:${id}`, fingerprint, ttlMs)),
 * };
 */
export interface FastPath {
  /** The fingerprint recorded for a completed delivery of (consumer, messageId), or undefined when none is known. */
  lookup(consumer: string, messageId: string): Promise<string | undefined>;
  /** Records that (consumer, messageId) completed with `fingerprint`, for `ttlMs` (the consumer's dedupe window). */
  remember(consumer: string, messageId: string, fingerprint: string, ttlMs: number): Promise<void>;
  /** How long the consumer waits for a lookup before going to the inbox, in ms. Default is 20 ms. */
  readonly timeoutMs?: number;
}

/** Default of `FastPath.timeoutMs`. */
export const DEFAULT_FAST_PATH_TIMEOUT_MS = 20;

/** What a lookup said: `hit` answers `duplicate`; every other result goes to the inbox. */
export type FastPathResult = 'hit' | 'miss' | 'mismatch' | 'error' | 'timeout' | 'bypassed';

/** Lookups or writes still waiting on the cache above which the consumer stops asking (a stalled cache). */
const MAX_PENDING = 1_000;
/** Failures (errors, timeouts) in a row after which the cache is left alone for `BYPASS_MS`. */
const FAILURES_TO_BYPASS = 10;
const BYPASS_MS = 1_000;

/**
 * The consumer's side of a `FastPath`: bounded lookups, fire-and-forget writes, and a short bypass after
 * repeated failures, so a slow or dead cache costs each delivery at most `timeoutMs` and then nothing.
 */
export class FastPathGuard {
  readonly #cache: FastPath;
  readonly #timeoutMs: number;
  #pending = 0;
  #failures = 0;
  #bypassUntil = 0;

  constructor(cache: FastPath) {
    this.#cache = cache;
    this.#timeoutMs = cache.timeoutMs ?? DEFAULT_FAST_PATH_TIMEOUT_MS;
  }

  /** Looks (consumer, messageId) up, at most `timeoutMs`; `hit` only for a completed delivery with `fingerprint`. */
  async check(consumer: string, messageId: string, fingerprint: string): Promise<FastPathResult> {
    if (this.#pending >= MAX_PENDING || performance.now() < this.#bypassUntil) return 'bypassed';
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#timeoutMs);
    });
    let found: Promise<string | undefined>;
    try {
      found = this.#cache.lookup(consumer, messageId);
    } catch (error) {
      found = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    const lookup = this.#track(found).then(
      (found): FastPathResult => (found === undefined ? 'miss' : found === fingerprint ? 'hit' : 'mismatch'),
      (): FastPathResult => 'error',
    );
    const result = await Promise.race([lookup, timeout]);
    clearTimeout(timer);
    if (result === 'error' || result === 'timeout') {
      if (++this.#failures >= FAILURES_TO_BYPASS) {
        this.#bypassUntil = performance.now() + BYPASS_MS;
        this.#failures = 0;
      }
    } else this.#failures = 0;
    return result;
  }

  /** Records a completed delivery without waiting for the cache; a failure only costs a later lookup. */
  remember(consumer: string, messageId: string, fingerprint: string, ttlMs: number): void {
    if (this.#pending >= MAX_PENDING || performance.now() < this.#bypassUntil) return;
    let write: Promise<void>;
    try {
      write = this.#cache.remember(consumer, messageId, fingerprint, ttlMs);
    } catch {
      return;
    }
    this.#track(write).catch(() => undefined);
  }

  #track<T>(work: Promise<T>): Promise<T> {
    this.#pending += 1;
    return work.finally(() => {
      this.#pending -= 1;
    });
  }
}
