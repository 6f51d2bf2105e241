// The caller's side of a FastPath (the consumer's, the HTTP middleware's): bounded lookups, fire-and-forget
// writes, a short bypass after repeated failures, and lookups sampled while nothing hits.

import type { Logger } from './consumer-types.js';
import { DEFAULT_FAST_PATH_TIMEOUT_MS, type FastPath, type FastPathResult } from './fast-path.js';

/** Lookups or writes still waiting on the cache above which the guard stops asking (a stalled cache). */
const MAX_PENDING = 1_000;
/**
 * Failures (errors, timeouts) in a row after which the cache is left alone for `BYPASS_MS`, once they have gone
 * on for `FAILING_FOR_MS` (at least): one stall of the cache times out every lookup in flight at once (16 at
 * concurrency 16), and that alone must not send a storm to Postgres for a second.
 */
const FAILURES_TO_BYPASS = 10;
const FAILING_FOR_MS = 50;
const BYPASS_MS = 1_000;
/** Below this recent hit rate, only one check in `SAMPLE_EVERY` is looked up: a lookup that misses is a tax. */
const LOW_HIT_RATE = 0.05;
const SAMPLE_EVERY = 16;
/** Weight of the newest lookup in the hit rate (an exponential moving average over about 20 lookups). */
const HIT_RATE_WEIGHT = 0.05;

/**
 * What a cached value must be for a hit: equal to this string (the consumer's payload fingerprint), or accepted
 * by this function (the HTTP middleware decodes a stored response and compares its request fingerprint). A
 * function that throws counts as a mismatch.
 */
export type FastPathExpectation = string | ((value: string) => boolean);

function matches(expected: FastPathExpectation, value: string): boolean {
  if (typeof expected === 'string') return value === expected;
  try {
    return expected(value);
  } catch {
    return false;
  }
}

/**
 * Guards a `FastPath` so that a slow or dead cache costs a caller at most `timeoutMs` per lookup, and then
 * nothing: after 10 failures in a row (errors or timeouts) that have gone on for 50 ms or two timeouts,
 * whichever is longer, the cache is left alone for a second (one stall that times out every lookup in flight
 * at once is not enough), and work still waiting on it is bounded (1,000 lookups and writes), so a stalled
 * connection cannot pile up work. Lookups
 * adapt to the traffic: while almost none hits (under 5% of recent lookups: first deliveries, no storm), one
 * check in 16 is looked up, so the cache costs work it cannot help next to nothing; once sampled lookups hit
 * again, every check is. Writes always happen, so the cache is warm when a storm comes. For inboxkit's own
 * packages (the consumer, `@inboxkit/http`); applications pass a `FastPath` and never build one.
 *
 * @example
 * const guard = new FastPathGuard(redisFastPath({ client: redis }));
 * if ((await guard.check('billing', messageId, fingerprint)) === 'hit') return duplicate;
 * // … after the commit:
 * guard.remember('billing', messageId, fingerprint, dedupeWindowMs);
 */
export class FastPathGuard {
  readonly #cache: FastPath;
  readonly #timeoutMs: number;
  /** How long failures must go on before a bypass: two timeouts' worth, and `FAILING_FOR_MS` at least. */
  readonly #failingForMs: number;
  #pending = 0;
  #failures = 0;
  /** When the current run of failures began (performance.now()). */
  #failingSince = 0;
  #bypassUntil = 0;
  /** Recent share of lookups that hit; starts optimistic. */
  #hitRate = 1;
  #sinceSample = 0;

  readonly #logger: Logger | undefined;
  readonly #label: string;
  readonly #bypassMs: number;

  /**
   * `options.logger` hears one warning each time the cache is left alone (the `bypassed` results that follow
   * are counted by the caller's metric); `options.label` names the guard in it (a consumer's name);
   * `options.bypassMs` is how long the cache is then left alone. Default is no log, the label `fast path` and
   * a bypass of 1,000 ms.
   */
  constructor(
    cache: FastPath,
    options: { readonly logger?: Logger; readonly label?: string; readonly bypassMs?: number } = {},
  ) {
    this.#cache = cache;
    this.#logger = options.logger;
    this.#label = options.label ?? 'fast path';
    const bypassMs = options.bypassMs ?? BYPASS_MS;
    if (!Number.isFinite(bypassMs) || bypassMs <= 0 || bypassMs > 2_147_483_647)
      throw new RangeError(
        `FastPathGuard: bypassMs must be a number of milliseconds in 1..2147483647, got ${bypassMs}`,
      );
    this.#bypassMs = bypassMs;
    this.#timeoutMs = cache.timeoutMs ?? DEFAULT_FAST_PATH_TIMEOUT_MS;
    this.#failingForMs = Math.max(FAILING_FOR_MS, 2 * this.#timeoutMs);
  }

  /** Looks (scope, id) up, at most `timeoutMs`; `hit` only for a value that meets `expected`. */
  async check(scope: string, id: string, expected: FastPathExpectation): Promise<FastPathResult> {
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
      found = this.#cache.lookup(scope, id);
    } catch (error) {
      found = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    const lookup = this.#track(found).then(
      (found): FastPathResult =>
        found === undefined ? 'miss' : matches(expected, found) ? 'hit' : 'mismatch',
      (): FastPathResult => 'error',
    );
    const result = await Promise.race([lookup, timeout]);
    clearTimeout(timer);
    if (result === 'error' || result === 'timeout') {
      const now = performance.now();
      if (this.#failures++ === 0) this.#failingSince = now;
      if (this.#failures >= FAILURES_TO_BYPASS && now - this.#failingSince >= this.#failingForMs) {
        this.#bypassUntil = now + this.#bypassMs;
        try {
          this.#logger?.warn(
            {
              fastPath: this.#label,
              failures: this.#failures,
              failingForMs: Math.round(now - this.#failingSince),
              bypassMs: this.#bypassMs,
            },
            `${this.#label}: the cache failed ${this.#failures} times in a row (last: ${result}); left alone for ${this.#bypassMs} ms, lookups go to Postgres`,
          );
        } catch {
          // Logging is best effort: a logger that throws must not fail the lookup it reports on.
        }
        this.#failures = 0;
      }
    } else {
      this.#failures = 0;
      this.#hitRate += HIT_RATE_WEIGHT * ((result === 'hit' ? 1 : 0) - this.#hitRate);
    }
    return result;
  }

  /** Records a value without waiting for the cache; a failure only costs a later lookup. */
  remember(scope: string, id: string, value: string, ttlMs: number): void {
    if (this.#pending >= MAX_PENDING || performance.now() < this.#bypassUntil) return;
    let write: Promise<void>;
    try {
      write = this.#cache.remember(scope, id, value, ttlMs);
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
