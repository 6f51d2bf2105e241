// The positive-integer check of the Kafka dead-letter queue reader's options (the consumer's and the
// publisher's options use core's `optionChecks`): a ConfigurationError that names the option.

import { ConfigurationError } from '@inboxkit/core';

/** A positive integer (milliseconds, counts), or `fallback` when unset. */
export function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) {
    throw new ConfigurationError(`${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}
