// Small validators shared by the option parsers of this package: each failure is a ConfigurationError that
// names the option and says what to change.

import { ConfigurationError } from '@inboxkit/core';

/** A positive integer (milliseconds, counts), or `fallback` when unset. */
export function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) {
    throw new ConfigurationError(`${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

/** One of `allowed`, or `fallback` when unset. */
export function oneOf<T extends string>(
  name: string,
  value: T | undefined,
  allowed: readonly T[],
  fallback: T,
): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value)) {
    throw new ConfigurationError(
      `${name} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** A function, or `undefined` when unset. */
export function optionalFunction<F>(name: string, value: F | undefined): F | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new ConfigurationError(`${name} must be a function, got ${typeof value}`);
  }
  return value;
}
