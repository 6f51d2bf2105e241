// Validates an idempotentConsumer() configuration once, fills in the defaults (DESIGN §8) and freezes it.
// Every ConfigurationError says which setting to change and to what.

import { DEFAULT_BACKOFF, retryHorizonMs, type ResolvedBackoff } from './backoff.js';
import type { IdempotentConsumer, IdempotentConsumerConfig } from './consumer-types.js';
import { ConfigurationError } from './errors.js';
import { checkFingerprintResolver } from './fingerprint-resolver.js';
import { checkFastPath } from './fast-path.js';
import { isValidConsumerName } from './message-id.js';

const DAY_MS = 86_400_000;

/** The defaults of DESIGN §8. */
export const CONSUMER_DEFAULTS = Object.freeze({
  maxAttempts: 5,
  dedupeWindowMs: 7 * DAY_MS,
  mode: 'transactional' as const,
  leaseMs: 60_000,
  handlerTimeoutMs: 30_000,
  lockTimeoutMs: 5_000,
  latePolicy: 'dead-letter' as const,
  maxMessageIdLength: 512,
});

/** The largest `maxMessageIdLength` accepted: longer keys would not fit a Postgres btree entry. */
export const MAX_MESSAGE_ID_LENGTH_LIMIT = 1_024;

/** The validated, frozen configuration of a consumer. */
export type ResolvedConsumerConfig<P, Tx> = IdempotentConsumer<P, Tx>['config'];

function positiveInteger(value: unknown, name: string, hint: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new ConfigurationError(`${name} must be a positive whole number of milliseconds, got ${String(value)}: ${hint}`);
  }
  return value;
}

function resolveBackoff(backoff: IdempotentConsumerConfig<unknown, unknown>['backoff']): ResolvedBackoff {
  const b = { ...DEFAULT_BACKOFF, ...(backoff ?? {}) };
  if (typeof b.initialDelayMs !== 'number' || !Number.isFinite(b.initialDelayMs) || b.initialDelayMs < 0) {
    throw new ConfigurationError(`backoff.initialDelayMs must be 0 or more milliseconds, got ${String(b.initialDelayMs)}`);
  }
  if (typeof b.multiplier !== 'number' || !Number.isFinite(b.multiplier) || b.multiplier < 1) {
    throw new ConfigurationError(`backoff.multiplier must be at least 1, got ${String(b.multiplier)}`);
  }
  if (typeof b.maxDelayMs !== 'number' || !Number.isFinite(b.maxDelayMs) || b.maxDelayMs < b.initialDelayMs) {
    throw new ConfigurationError(
      `backoff.maxDelayMs must be at least backoff.initialDelayMs (${b.initialDelayMs}), got ${String(b.maxDelayMs)}`,
    );
  }
  if (b.jitter !== 'full' && b.jitter !== 'none') {
    throw new ConfigurationError(`backoff.jitter must be 'full' or 'none', got ${String(b.jitter)}`);
  }
  return Object.freeze(b);
}

/** Validates `config` and returns it frozen with every default filled in. Throws a `ConfigurationError`. */
export function resolveConsumerConfig<P, Tx>(config: IdempotentConsumerConfig<P, Tx>): ResolvedConsumerConfig<P, Tx> {
  if (typeof config !== 'object' || config === null) {
    throw new ConfigurationError('idempotentConsumer() needs a configuration object with name, store and handler');
  }
  if (!isValidConsumerName(config.name)) {
    throw new ConfigurationError(
      `name must be 1-200 printable characters without surrounding spaces, not only invisible ones (it scopes dedupe), got ${JSON.stringify(config.name)}`,
    );
  }
  const store = config.store as unknown as Record<string, unknown> | undefined;
  if (typeof store !== 'object' || store === null || typeof store['runTransactional'] !== 'function') {
    throw new ConfigurationError(
      'store must be an InboxStore: pass new PostgresInboxStore({ db }) from @inboxkit/core/postgres or new InMemoryInboxStore() from @inboxkit/core/memory',
    );
  }
  if (typeof config.handler !== 'function') {
    throw new ConfigurationError('handler must be a function (message, context) => Promise<void>');
  }
  const maxAttempts = config.maxAttempts ?? CONSUMER_DEFAULTS.maxAttempts;
  if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1_000) {
    throw new ConfigurationError(`maxAttempts must be a whole number from 1 to 1000 (1 = no retries), got ${String(maxAttempts)}`);
  }
  const mode = config.mode ?? CONSUMER_DEFAULTS.mode;
  if (mode !== 'transactional' && mode !== 'leased') {
    throw new ConfigurationError(`mode must be 'transactional' or 'leased', got ${JSON.stringify(mode)}`);
  }
  const backoff = resolveBackoff(config.backoff);
  const dedupeWindowMs = positiveInteger(
    config.dedupeWindowMs ?? CONSUMER_DEFAULTS.dedupeWindowMs,
    'dedupeWindowMs',
    'it is how long a completed id is remembered (default 7 days)',
  );
  const horizon = retryHorizonMs(backoff, maxAttempts);
  if (dedupeWindowMs < horizon) {
    throw new ConfigurationError(
      `dedupeWindowMs (${dedupeWindowMs} ms) is shorter than the retry horizon (${horizon} ms: the sum of the largest backoff delays over ${maxAttempts} attempts): raise dedupeWindowMs to at least ${horizon}, or lower maxAttempts or backoff.maxDelayMs`,
    );
  }
  const handlerTimeoutMs = positiveInteger(
    config.handlerTimeoutMs ?? CONSUMER_DEFAULTS.handlerTimeoutMs,
    'handlerTimeoutMs',
    'the handler signal is aborted after it',
  );
  const leaseMs = positiveInteger(config.leaseMs ?? CONSUMER_DEFAULTS.leaseMs, 'leaseMs', 'the lease of leased mode');
  if (mode === 'leased' && leaseMs <= handlerTimeoutMs) {
    throw new ConfigurationError(
      `leaseMs (${leaseMs}) must be longer than handlerTimeoutMs (${handlerTimeoutMs}), or another worker can take the message over while the handler still runs: raise leaseMs above ${handlerTimeoutMs} or lower handlerTimeoutMs`,
    );
  }
  const lockTimeoutMs = positiveInteger(
    config.lockTimeoutMs ?? CONSUMER_DEFAULTS.lockTimeoutMs,
    'lockTimeoutMs',
    'how long a concurrent duplicate waits before retry',
  );
  const latePolicy = config.latePolicy ?? CONSUMER_DEFAULTS.latePolicy;
  if (latePolicy !== 'process' && latePolicy !== 'dead-letter') {
    throw new ConfigurationError(`latePolicy must be 'process' or 'dead-letter', got ${JSON.stringify(latePolicy)}`);
  }
  const maxMessageIdLength = config.maxMessageIdLength ?? CONSUMER_DEFAULTS.maxMessageIdLength;
  if (!Number.isSafeInteger(maxMessageIdLength) || maxMessageIdLength < 1 || maxMessageIdLength > MAX_MESSAGE_ID_LENGTH_LIMIT) {
    throw new ConfigurationError(
      `maxMessageIdLength must be a whole number from 1 to ${MAX_MESSAGE_ID_LENGTH_LIMIT}, got ${String(maxMessageIdLength)}`,
    );
  }
  for (const key of ['schema', 'decode', 'isRetriable', 'logger'] as const) {
    const value = config[key];
    if (value !== undefined && typeof value !== 'object' && typeof value !== 'function') {
      throw new ConfigurationError(`${key} must be ${key === 'schema' || key === 'logger' ? 'an object' : 'a function'}`);
    }
  }
  if (config.decode !== undefined && typeof config.decode !== 'function') {
    throw new ConfigurationError('decode must be a function (body) => payload');
  }
  if (config.dayOf !== undefined && typeof config.dayOf !== 'function') {
    throw new ConfigurationError('dayOf must be a function (message) => Date | undefined');
  }
  if (config.isRetriable !== undefined && typeof config.isRetriable !== 'function') {
    throw new ConfigurationError('isRetriable must be a function (error) => boolean');
  }
  if (config.outbox !== undefined && typeof config.outbox !== 'function') {
    throw new ConfigurationError(
      'outbox must be a function (tx, origin) => outbox: pass transactionalOutbox() from @inboxkit/outbox',
    );
  }
  checkFastPath(config.fastPath);
  checkFingerprintResolver(config.fingerprint, 'fingerprint');
  if (config.hooks?.onOutcome !== undefined && typeof config.hooks.onOutcome !== 'function') {
    throw new ConfigurationError('hooks.onOutcome must be a function (event) => void');
  }
  return Object.freeze({
    ...config,
    maxAttempts,
    mode,
    backoff,
    dedupeWindowMs,
    handlerTimeoutMs,
    leaseMs,
    lockTimeoutMs,
    latePolicy,
    maxMessageIdLength,
  });
}
