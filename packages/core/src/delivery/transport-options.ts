// The checks every transport's options share, written once: counts, durations, enumerations, callbacks, the
// reconnect/start backoff, the default logger, and the bounded wait of `stop()`. Each failure is a
// ConfigurationError that names the function and the option and says what was given.

import type { Logger } from '../consumer-types.js';
import { ConfigurationError } from '../errors.js';
import { silentLogger } from '../silent-logger.js';

/** The option checks of one function (`optionChecks('kafkaConsumer')`); every message starts with its name. */
export interface OptionChecks {
  /** A ConfigurationError `<what>: <message>`. */
  error(message: string): ConfigurationError;
  /**
   * An integer from `min` to `max` (default 1 to `Number.MAX_SAFE_INTEGER`), or `fallback` when unset.
   * `hint` is appended to the message.
   */
  integer(name: string, value: number | undefined, fallback: number, range?: IntegerRange): number;
  /** A number of ms above 0 (`Infinity` allowed), or `fallback` when unset. */
  positiveMs(name: string, value: number | undefined, fallback: number): number;
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
    integer(name, value, fallback, range = {}) {
      const n = value ?? fallback;
      const { min = 1, max = Number.MAX_SAFE_INTEGER, hint = '' } = range;
      if (!Number.isInteger(n) || n < min || n > max) {
        const expected =
          min === 1 && max === Number.MAX_SAFE_INTEGER
            ? 'a positive integer'
            : `an integer from ${min} to ${max}`;
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
