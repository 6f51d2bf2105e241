// The checks every transport's options share, written once: counts, durations, enumerations, callbacks, the
// reconnect/start backoff, the default logger, and the bounded wait of `stop()`. Each failure is a
// ConfigurationError that names the function and the option and says what was given.

import type { Logger } from '../consumer-types.js';
import { ConfigurationError } from '../errors.js';
import { silentLogger } from '../silent-logger.js';
import { attemptLedgerOf } from './attempt-ledger.js';

/** The option checks of one function (`optionChecks('kafkaConsumer')`); every message starts with its name. */
export interface OptionChecks {
  /** A ConfigurationError `<what>: <message>`. */
  error(message: string): ConfigurationError;
  /**
   * The transport's `handler`: an `idempotentConsumer(...)` — `name`, `config`, `handle`, `handleBatch` and its
   * attempt ledger — or a wrapper of one that forwards the ledger (`withAttemptLedger`).
   */
  handler<H>(value: H): H;
  /**
   * An integer from `min` to `max` (default 1 to `Number.MAX_SAFE_INTEGER`), or `fallback` when unset.
   * `hint` is appended to the message.
   */
  integer(name: string, value: number | undefined, fallback: number, range?: IntegerRange): number;
  /** A number of ms above 0 (`Infinity` allowed), or `fallback` when unset. */
  positiveMs(name: string, value: number | undefined, fallback: number): number;
  /**
   * A finite number (fractions allowed) from `min` (default 0) to `max` (default: no bound), or `fallback` when
   * unset. A bound may be another option, `{ name, value }`, and is then named in the message.
   */
  number(name: string, value: number | undefined, fallback: number, range?: NumberRange): number;
  /**
   * A non-empty string, or `fallback` when unset (`undefined` for an optional one). `expected` completes
   * "must be …"; default is `a non-empty string`.
   */
  text<F extends string | undefined>(
    name: string,
    value: string | undefined,
    fallback: F,
    expected?: string,
  ): string | F;
  /** One of `allowed`, or `fallback` when unset. */
  oneOf<T extends string>(name: string, value: T | undefined, allowed: readonly T[], fallback: T): T;
  /** A function, or `undefined` when unset. */
  optionalFunction<F>(name: string, value: F | undefined): F | undefined;
  /** `true` or `false`, or `fallback` when unset. */
  optionalBoolean(name: string, value: boolean | undefined, fallback: boolean): boolean;
  /**
   * A backoff `{ initialDelayMs, maxDelayMs }` (each doubling attempt waits up to the max): default 500 ms up
   * to 30,000 ms (or `initialDelayMs`, when larger); the max must be at least the initial delay. `integer`
   * requires whole milliseconds.
   */
  backoff(name: string, value: BackoffOptions | undefined, integer?: boolean): Required<BackoffOptions>;
}

/** The bounds of `OptionChecks.integer`. */
export interface IntegerRange {
  readonly min?: number;
  readonly max?: number;
  readonly hint?: string;
}

/** The bounds of `OptionChecks.number`: a number, or another option's name and value. */
export interface NumberRange {
  readonly min?: number | NamedBound;
  readonly max?: number | NamedBound;
}

/** A bound that is another option: `{ name: 'deleteBatchDelayMs', value: 20 }` reads "deleteBatchDelayMs (20)". */
export interface NamedBound {
  readonly name: string;
  readonly value: number;
}

/** A doubling backoff between attempts, as the transports' `reconnect` and `startRetry` options take it. */
export interface BackoffOptions {
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
}

/**
 * The option checks of `what` (a transport's function name): each failure throws a ConfigurationError
 * `<what>: <option> must be …, got <value>`.
 *
 * @example
 * const check = optionChecks('sqsConsumer');
 * const batchSize = check.integer('batchSize', options.batchSize, 10, { max: 10 });
 * const { initialDelayMs, maxDelayMs } = check.backoff('reconnect', options.reconnect);
 */
export function optionChecks(what: string): OptionChecks {
  const error = (message: string): ConfigurationError => new ConfigurationError(`${what}: ${message}`);
  const checks: OptionChecks = {
    error,
    handler(value) {
      const h = value as
        { name?: unknown; config?: unknown; handle?: unknown; handleBatch?: unknown } | undefined;
      const methods = typeof h?.handle === 'function' && typeof h.handleBatch === 'function';
      if (
        !methods ||
        typeof h.name !== 'string' ||
        typeof h.config !== 'object' ||
        attemptLedgerOf(h) === undefined
      ) {
        throw error(
          '`handler` must be an idempotent consumer (idempotentConsumer(...)), or a wrapper of one that forwards ' +
            'its attempt ledger (withAttemptLedger)',
        );
      }
      return value;
    },
    integer(name, value, fallback, range = {}) {
      const n = value ?? fallback;
      const { min = 1, max = Number.MAX_SAFE_INTEGER, hint = '' } = range;
      if (!Number.isInteger(n) || n < min || n > max) {
        const expected =
          max !== Number.MAX_SAFE_INTEGER
            ? `an integer from ${min} to ${max}`
            : min === 1
              ? 'a positive integer'
              : `an integer of ${min} or more`;
        throw error(`${name} must be ${expected}, got ${String(value)}${hint}`);
      }
      return n;
    },
    positiveMs(name, value, fallback) {
      const ms = value ?? fallback;
      if (typeof ms !== 'number' || Number.isNaN(ms) || ms <= 0) {
        throw error(`${name} must be a positive number of ms (or Infinity), got ${String(value)}`);
      }
      return ms;
    },
    number(name, value, fallback, range = {}) {
      const n = value ?? fallback;
      const bound = (b: number | NamedBound) =>
        typeof b === 'number'
          ? { text: String(b), value: b }
          : { text: `${b.name} (${b.value})`, value: b.value };
      const min = bound(range.min ?? 0);
      const max = range.max === undefined ? undefined : bound(range.max);
      if (
        typeof n !== 'number' ||
        !Number.isFinite(n) ||
        n < min.value ||
        (max !== undefined && n > max.value)
      ) {
        const expected = max === undefined ? `${min.text} or more` : `from ${min.text} to ${max.text}`;
        throw error(`${name} must be ${expected}, got ${String(value)}`);
      }
      return n;
    },
    text(name, value, fallback, expected = 'a non-empty string') {
      if (value === undefined) return fallback;
      if (typeof value !== 'string' || value === '')
        throw error(`${name} must be ${expected}, got ${JSON.stringify(value)}`);
      return value;
    },
    oneOf(name, value, allowed, fallback) {
      if (value === undefined) return fallback;
      if (!allowed.includes(value)) {
        const names = allowed.map((a) => `'${a}'`).join(', ');
        throw error(`${name} must be one of ${names}, got ${JSON.stringify(value)}`);
      }
      return value;
    },
    optionalFunction(name, value) {
      if (value !== undefined && typeof value !== 'function') {
        throw error(`${name} must be a function, got ${typeof value}`);
      }
      return value;
    },
    optionalBoolean(name, value, fallback) {
      if (value === undefined) return fallback;
      if (typeof value !== 'boolean') throw error(`${name} must be true or false, got ${String(value)}`);
      return value;
    },
    backoff(name, value, integer = false) {
      const check = (option: string, ms: number | undefined, fallback: number): number =>
        integer
          ? checks.integer(`${name}.${option}`, ms, fallback)
          : checks.positiveMs(`${name}.${option}`, ms, fallback);
      const initialDelayMs = check('initialDelayMs', value?.initialDelayMs, 500);
      const maxDelayMs = check('maxDelayMs', value?.maxDelayMs, Math.max(30_000, initialDelayMs));
      if (maxDelayMs < initialDelayMs) {
        throw error(`${name}.maxDelayMs must be at least ${name}.initialDelayMs`);
      }
      return { initialDelayMs, maxDelayMs };
    },
  };
  return checks;
}

/** A transport's logger: its own `logger` option, else the idempotent consumer's, else silent. */
export function transportLogger(
  logger: Logger | undefined,
  handler: { readonly config?: { readonly logger?: Logger | undefined } | undefined } | undefined,
): Logger {
  return logger ?? handler?.config?.logger ?? silentLogger;
}

/**
 * Waits for `promise` to settle (fulfilled or rejected), at most `ms`: true when it settled in time. The wait
 * of a transport's `stop()` for work in flight (`closeTimeoutMs`).
 *
 * @example
 * if (!(await settledWithin(drained, closeTimeoutMs))) logger.warn({ closeTimeoutMs }, 'still running');
 */
export async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = await Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    timeout,
  ]);
  clearTimeout(timer);
  return settled;
}
