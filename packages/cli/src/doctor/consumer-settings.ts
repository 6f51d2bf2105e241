// The consumer settings `inboxkit doctor` checks, read from a JSON config file and flags, with the defaults
// of @inboxkit/core (DESIGN §8) for whatever is not given.

import { CONSUMER_DEFAULTS, ConfigurationError, DEFAULT_BACKOFF } from '@inboxkit/core';

import { parseDuration } from '../settings/parse-values.js';

/** One consumer's settings, every value resolved. Durations in ms. */
export interface ConsumerSettings {
  readonly name: string;
  /** Default is 5. */
  readonly maxAttempts: number;
  /** Default is 7 days. */
  readonly dedupeWindowMs: number;
  /** Default is 30 s. */
  readonly handlerTimeoutMs: number;
  /** Default is 60 s (leased mode only). */
  readonly leaseMs: number;
  /** Default is `transactional`. */
  readonly mode: 'transactional' | 'leased';
  /** Default is 1 s. */
  readonly backoffInitialMs: number;
  /** Default is 2. */
  readonly backoffMultiplier: number;
  /** Default is 5 min. */
  readonly backoffMaxMs: number;
  /** The SQS source queue's visibility timeout, when known. */
  readonly sqsVisibilityTimeoutMs?: number | undefined;
  /** The SQS source queue's redrive `maxReceiveCount`, when known. */
  readonly sqsMaxReceiveCount?: number | undefined;
  /** The RabbitMQ quorum queue's `x-delivery-limit`, when known. */
  readonly rabbitmqDeliveryLimit?: number | undefined;
}

/** Core's defaults (DESIGN §8), read from core so doctor and `idempotentConsumer()` agree. */
export const CORE_DEFAULTS = Object.freeze({
  maxAttempts: CONSUMER_DEFAULTS.maxAttempts,
  dedupeWindowMs: CONSUMER_DEFAULTS.dedupeWindowMs,
  handlerTimeoutMs: CONSUMER_DEFAULTS.handlerTimeoutMs,
  leaseMs: CONSUMER_DEFAULTS.leaseMs,
  mode: CONSUMER_DEFAULTS.mode,
  backoffInitialMs: DEFAULT_BACKOFF.initialDelayMs,
  backoffMultiplier: DEFAULT_BACKOFF.multiplier,
  backoffMaxMs: DEFAULT_BACKOFF.maxDelayMs,
});

type Json = Record<string, unknown>;

function pick(source: Json, ...names: string[]): unknown {
  for (const name of names) {
    const [head, ...rest] = name.split('.');
    let value: unknown = source[head!];
    for (const part of rest)
      value = value !== null && typeof value === 'object' ? (value as Json)[part] : undefined;
    if (value !== undefined) return value;
  }
  return undefined;
}

function duration(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && value >= 0) return value;
  if (typeof value === 'string') {
    try {
      return parseDuration(value, where);
    } catch {
      // fall through to the error below
    }
  }
  throw new ConfigurationError(
    `${where} must be a duration in ms or a string such as "30s" or "7d", got ${JSON.stringify(value)}`,
  );
}

function count(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  const n = typeof value === 'string' ? Number(value) : value;
  if (typeof n === 'number' && Number.isInteger(n) && n > 0) return n;
  throw new ConfigurationError(`${where} must be a positive whole number, got ${JSON.stringify(value)}`);
}

/**
 * Reads consumer settings from a parsed config file: either one consumer object or `{ "consumers": [ … ] }`.
 * Names follow `idempotentConsumer()`'s config (`maxAttempts`, `dedupeWindowMs`, `handlerTimeoutMs`, `leaseMs`,
 * `mode`, `backoff.initialDelayMs` …); the same names without `Ms` accept strings such as `"7d"`. Broker
 * limits go under `sqs.visibilityTimeout`, `sqs.maxReceiveCount`, `rabbitmq.deliveryLimit`.
 */
export function readConsumerSettings(
  config: unknown,
  overrides: Readonly<Record<string, number | string>>,
  file: string,
): ConsumerSettings[] {
  if (config !== undefined && (config === null || typeof config !== 'object' || Array.isArray(config))) {
    throw new ConfigurationError(`${file} must hold a JSON object (one consumer, or { "consumers": [ … ] })`);
  }
  const root = (config ?? {}) as Json;
  const list = Array.isArray(root.consumers) ? (root.consumers as unknown[]) : [root];
  return list.map((item, i) => {
    if (item === null || typeof item !== 'object')
      throw new ConfigurationError(`${file}: consumers[${i}] must be an object`);
    const c = { ...root, ...(item as Json) };
    const at = (key: string): string => `${file}: ${list.length > 1 ? `consumers[${i}].` : ''}${key}`;
    const name = typeof c.name === 'string' ? c.name : list.length > 1 ? `consumer #${i + 1}` : 'consumer';
    const mode = overrides.mode ?? c.mode ?? CORE_DEFAULTS.mode;
    if (mode !== 'transactional' && mode !== 'leased') {
      throw new ConfigurationError(
        `${at('mode')} must be "transactional" or "leased", got ${JSON.stringify(mode)}`,
      );
    }
    const num = (flag: string, value: number | undefined, fallback: number): number =>
      typeof overrides[flag] === 'number' ? overrides[flag] : (value ?? fallback);
    const opt = (flag: string, value: number | undefined): number | undefined =>
      typeof overrides[flag] === 'number' ? overrides[flag] : value;
    const multiplier = pick(c, 'backoff.multiplier', 'backoffMultiplier');
    if (multiplier !== undefined && !(typeof multiplier === 'number' && multiplier >= 1)) {
      throw new ConfigurationError(
        `${at('backoff.multiplier')} must be a number ≥ 1, got ${JSON.stringify(multiplier)}`,
      );
    }
    return Object.freeze({
      name,
      maxAttempts: num(
        'max-attempts',
        count(pick(c, 'maxAttempts'), at('maxAttempts')),
        CORE_DEFAULTS.maxAttempts,
      ),
      dedupeWindowMs: num(
        'dedupe-window',
        duration(pick(c, 'dedupeWindowMs', 'dedupeWindow'), at('dedupeWindow')),
        CORE_DEFAULTS.dedupeWindowMs,
      ),
      handlerTimeoutMs: num(
        'handler-timeout',
        duration(pick(c, 'handlerTimeoutMs', 'handlerTimeout'), at('handlerTimeout')),
        CORE_DEFAULTS.handlerTimeoutMs,
      ),
      leaseMs: num('lease', duration(pick(c, 'leaseMs', 'lease'), at('lease')), CORE_DEFAULTS.leaseMs),
      mode,
      backoffInitialMs: num(
        'backoff-initial',
        duration(pick(c, 'backoff.initialDelayMs', 'backoff.initialDelay'), at('backoff.initialDelay')),
        CORE_DEFAULTS.backoffInitialMs,
      ),
      backoffMultiplier: num('backoff-multiplier', multiplier, CORE_DEFAULTS.backoffMultiplier),
      backoffMaxMs: num(
        'backoff-max',
        duration(pick(c, 'backoff.maxDelayMs', 'backoff.maxDelay'), at('backoff.maxDelay')),
        CORE_DEFAULTS.backoffMaxMs,
      ),
      sqsVisibilityTimeoutMs: opt(
        'sqs-visibility-timeout',
        duration(pick(c, 'sqs.visibilityTimeoutMs', 'sqs.visibilityTimeout'), at('sqs.visibilityTimeout')),
      ),
      sqsMaxReceiveCount: opt(
        'sqs-max-receive-count',
        count(pick(c, 'sqs.maxReceiveCount'), at('sqs.maxReceiveCount')),
      ),
      rabbitmqDeliveryLimit: opt(
        'rabbitmq-delivery-limit',
        count(pick(c, 'rabbitmq.deliveryLimit'), at('rabbitmq.deliveryLimit')),
      ),
    });
  });
}
