import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { ConfigurationError } from '../src/errors.js';
import { InMemoryInboxStore } from '../src/memory/index.js';
import type { IdempotentConsumerConfig } from '../src/consumer-types.js';

const store = new InMemoryInboxStore();
const base: IdempotentConsumerConfig<unknown, unknown> = { name: 'c', store, handler: async () => {} };

function configError(overrides: Record<string, unknown>): ConfigurationError {
  try {
    idempotentConsumer({ ...base, ...overrides });
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return error as ConfigurationError;
  }
  throw new Error(`expected a ConfigurationError for ${JSON.stringify(overrides)}`);
}

describe('idempotentConsumer configuration', () => {
  it('fills in the documented defaults and freezes the result', () => {
    const c = idempotentConsumer(base);
    expect(c.config).toMatchObject({
      name: 'c',
      maxAttempts: 5,
      dedupeWindowMs: 7 * 86_400_000,
      mode: 'transactional',
      leaseMs: 60_000,
      handlerTimeoutMs: 30_000,
      lockTimeoutMs: 5_000,
      latePolicy: 'dead-letter',
      maxMessageIdLength: 512,
      backoff: { initialDelayMs: 1_000, multiplier: 2, maxDelayMs: 300_000, jitter: 'full' },
    });
    expect(Object.isFrozen(c.config)).toBe(true);
    expect(c.name).toBe('c');
  });

  it.each([
    [{ name: '' }, /name must be 1-200 printable/],
    [{ name: 'x'.repeat(201) }, /name must be 1-200/],
    [{ name: 'a\nb' }, /name/],
    [{ name: '\u200B\u200D' }, /name must be 1-200 printable/],
    [{ name: '\u202E\u2066' }, /name must be 1-200 printable/],
    [{ store: undefined }, /store must be an InboxStore/],
    [{ store: {} }, /store must be an InboxStore/],
    [{ handler: 'nope' }, /handler must be a function/],
    [{ maxAttempts: 0 }, /maxAttempts must be a whole number from 1/],
    [{ maxAttempts: 2.5 }, /maxAttempts/],
    [{ dedupeWindowMs: 0 }, /dedupeWindowMs must be a positive/],
    [{ dedupeWindowMs: -5 }, /dedupeWindowMs/],
    [{ handlerTimeoutMs: 0 }, /handlerTimeoutMs must be a positive/],
    [{ lockTimeoutMs: Number.NaN }, /lockTimeoutMs/],
    [{ leaseMs: -1 }, /leaseMs/],
    [{ mode: 'eventual' }, /mode must be 'transactional' or 'leased'/],
    [{ latePolicy: 'drop' }, /latePolicy must be 'process' or 'dead-letter'/],
    [{ maxMessageIdLength: 0 }, /maxMessageIdLength/],
    [{ maxMessageIdLength: 5_000 }, /maxMessageIdLength must be a whole number from 1 to 1024/],
    [{ backoff: { initialDelayMs: -1 } }, /backoff.initialDelayMs/],
    [{ backoff: { multiplier: 0.5 } }, /backoff.multiplier must be at least 1/],
    [{ backoff: { initialDelayMs: 10, maxDelayMs: 5 } }, /backoff.maxDelayMs must be at least/],
    [{ backoff: { jitter: 'some' } }, /backoff.jitter/],
    [{ isRetriable: true }, /isRetriable/],
    [{ hooks: { onOutcome: 1 } }, /hooks.onOutcome/],
  ])('rejects %j with a message that says what to change', (overrides, message) => {
    expect(configError(overrides).message).toMatch(message);
  });

  it('requires the dedupe window to cover the retry horizon, and says by how much', () => {
    const error = configError({ dedupeWindowMs: 10_000, maxAttempts: 5 });
    expect(error.message).toContain('retry horizon (15000 ms');
    expect(error.message).toContain('raise dedupeWindowMs to at least 15000');
    expect(() => idempotentConsumer({ ...base, dedupeWindowMs: 15_000, maxAttempts: 5 })).not.toThrow();
  });

  it('requires, in leased mode, a lease longer than the handler timeout', () => {
    expect(configError({ mode: 'leased', leaseMs: 30_000, handlerTimeoutMs: 30_000 }).message).toMatch(
      /leaseMs \(30000\) must be longer than handlerTimeoutMs \(30000\)/,
    );
    expect(() => idempotentConsumer({ ...base, mode: 'leased', leaseMs: 30_001, handlerTimeoutMs: 30_000 })).not.toThrow();
    // Transactional mode has no lease to compare.
    expect(() => idempotentConsumer({ ...base, leaseMs: 1_000, handlerTimeoutMs: 30_000 })).not.toThrow();
  });

  it('refuses a fastPath without lookup and remember, or with a timeout that is not positive', () => {
    expect(configError({ fastPath: { get: () => undefined } }).message).toMatch(/redisFastPath/);
    const fastPath = { lookup: async () => undefined, remember: async () => {} };
    expect(configError({ fastPath: { ...fastPath, timeoutMs: 0 } }).message).toMatch(/fastPath.timeoutMs/);
    expect(() => idempotentConsumer({ ...base, fastPath: { ...fastPath, timeoutMs: 15 } })).not.toThrow();
  });

  it('refuses a missing configuration object', () => {
    expect(() => idempotentConsumer(undefined as unknown as IdempotentConsumerConfig<unknown, unknown>)).toThrow(ConfigurationError);
  });
});
