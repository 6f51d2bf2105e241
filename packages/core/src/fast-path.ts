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

/**
 * What a lookup said: `hit` answers `duplicate`; every other result goes to the inbox. `skipped`: not looked up,
 * because almost nothing has hit lately (see `FastPathGuard`); `bypassed`: the cache failed repeatedly or is
 * stalled, and is left alone for a moment.
 */
export type FastPathResult = 'hit' | 'miss' | 'mismatch' | 'error' | 'timeout' | 'bypassed' | 'skipped';

/** Lookups or writes still waiting on the cache above which the consumer stops asking (a stalled cache). */
const MAX_PENDING = 1_000;
/** Failures (errors, timeouts) in a row after which the cache is left alone for `BYPASS_MS`. */
const FAILURES_TO_BYPASS = 10;
const BYPASS_MS = 1_000;
/** Below this recent hit rate, only one delivery in `SAMPLE_EVERY` is looked up: a lookup that misses is a tax. */
const LOW_HIT_RATE = 0.05;
const SAMPLE_EVERY = 16;
/** Weight of the newest lookup in the hit rate (an exponential moving average over about 20 lookups). */
const HIT_RATE_WEIGHT = 0.05;

/**
 * The consumer's side of a `FastPath`: bounded lookups, fire-and-forget writes, and a short bypass after
 * repeated failures, so a slow or dead cache costs each delivery at most `timeoutMs` and then nothing. Lookups
 * adapt to the traffic: while almost none hits (first deliveries only, no storm), one delivery in 16 is looked
 * up, so the cache costs first deliveries next to nothing; a few hits (a storm starting) and every delivery is
 * looked up again. Writes after commits always happen, so the cache is warm when a storm comes.
 */
export class FastPathGuard {
  readonly #cache: FastPath;
  readonly #timeoutMs: number;
  #pending = 0;
  #failures = 0;
  #bypassUntil = 0;
  /** Recent share of lookups that hit; starts optimistic. */
  #hitRate = 1;
  #sinceSample = 0;

  constructor(cache: FastPath) {
    this.#cache = cache;
    this.#timeoutMs = cache.timeoutMs ?? DEFAULT_FAST_PATH_TIMEOUT_MS;
  }

  /** Looks (consumer, messageId) up, at most `timeoutMs`; `hit` only for a completed delivery with `fingerprint`. */
  async check(consumer: string, messageId: string, fingerprint: string): Promise<FastPathResult> {
    if (this.#pending >= MAX_PENDING || performance.now() < this.#bypassUntil) return 'bypassed';
    if (this.#hitRate < LOW_HIT_RATE && ++this.#sinceSample < SAMPLE_EVERY) return 'skipped';
    this.#sinceSample = 0;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      // Decided in the check phase, after the poll phase has read any answer that arrived: when the event loop
      // was busy past the deadline, an answer already on the socket wins over the late timer.
      timer = setTimeout(() => setImmediate(() => resolve('timeout')), this.#timeoutMs);
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
    } else {
      this.#failures = 0;
      this.#hitRate += HIT_RATE_WEIGHT * ((result === 'hit' ? 1 : 0) - this.#hitRate);
    }
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
