// The option checks the transports share: defaults, bounds, messages naming the function and the option, the
// backoff pair, the default logger, and the bounded wait of stop().

import { describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  optionChecks,
  settledWithin,
  silentLogger,
  transportLogger,
} from '../../src/index.js';

const check = optionChecks('someConsumer');

describe('optionChecks', () => {
  it('fills defaults and returns valid values as they are', () => {
    expect(check.integer('concurrency', undefined, 10)).toBe(10);
    expect(check.integer('prefetch', 0, 5, { min: 0, max: 10 })).toBe(0);
    expect(check.positiveMs('startTimeoutMs', undefined, Infinity)).toBe(Infinity);
    expect(check.positiveMs('closeTimeoutMs', 1.5, 30_000)).toBe(1.5);
    expect(check.oneOf('mode', undefined, ['message', 'batch'], 'message')).toBe('message');
    expect(check.optionalFunction('messageId', undefined)).toBeUndefined();
    expect(check.optionalBoolean('fromBeginning', undefined, false)).toBe(false);
  });

  it('rejects bad values with a ConfigurationError naming the function, the option and the value', () => {
    const cases: [() => unknown, RegExp][] = [
      [
        () => check.integer('batchSize', 0, 10),
        /^someConsumer: batchSize must be a positive integer, got 0$/,
      ],
      [
        () => check.integer('batchSize', 11, 10, { max: 10, hint: ' (at most 10)' }),
        /^someConsumer: batchSize must be an integer from 1 to 10, got 11 \(at most 10\)$/,
      ],
      [() => check.integer('concurrency', 1.5, 1), /concurrency must be a positive integer, got 1.5/],
      [
        () => check.positiveMs('startTimeoutMs', 0, Infinity),
        /startTimeoutMs must be a positive number of ms/,
      ],
      [() => check.positiveMs('closeTimeoutMs', Number.NaN, 1), /closeTimeoutMs .* got NaN/],
      [
        () => check.oneOf('mode', 'bulk', ['message', 'batch'], 'message'),
        /mode must be one of 'message', 'batch', got "bulk"/,
      ],
      [() => check.optionalFunction('messageId', 'x' as never), /messageId must be a function, got string/],
      [
        () => check.optionalBoolean('fromBeginning', 'yes' as never, false),
        /fromBeginning must be true or false/,
      ],
    ];
    for (const [run, message] of cases) {
      expect(run).toThrow(ConfigurationError);
      expect(run).toThrow(message);
    }
  });

  it('checks numbers in a range (fractions allowed, a bound may name another option) and non-empty texts', () => {
    expect(check.number('closeTimeoutMs', undefined, 35_000)).toBe(35_000);
    expect(check.number('deleteBatchDelayMs', 2.5, 5, { max: 1_000 })).toBe(2.5);
    expect(check.text('messageIdAttribute', undefined, 'message-id')).toBe('message-id');
    expect(check.text('messageIdBodyField', undefined, undefined)).toBeUndefined();
    expect(check.integer('ackWaitMs', undefined, 30_000, { min: 1_000 })).toBe(30_000);
    const cases: [() => unknown, RegExp][] = [
      [
        () => check.number('closeTimeoutMs', -1, 0),
        /^someConsumer: closeTimeoutMs must be 0 or more, got -1$/,
      ],
      [() => check.number('closeTimeoutMs', Infinity, 0), /closeTimeoutMs must be 0 or more, got Infinity/],
      [() => check.number('delayMs', 1_001, 5, { max: 1_000 }), /delayMs must be from 0 to 1000, got 1001/],
      [
        () => check.number('maxDelayMs', 10, 50, { min: { name: 'delayMs', value: 20 }, max: 1_000 }),
        /maxDelayMs must be from delayMs \(20\) to 1000, got 10/,
      ],
      [() => check.text('stream', '', 'S'), /^someConsumer: stream must be a non-empty string, got ""$/],
      [() => check.text('field', 3 as never, undefined, 'a dot path'), /field must be a dot path, got 3/],
      [
        () => check.integer('ackWaitMs', 999, 30_000, { min: 1_000 }),
        /ackWaitMs must be an integer of 1000 or more, got 999/,
      ],
    ];
    for (const [run, message] of cases) {
      expect(run).toThrow(ConfigurationError);
      expect(run).toThrow(message);
    }
  });

  it('resolves a backoff: 500 ms up to 30 s by default, the max never below the initial delay', () => {
    expect(check.backoff('reconnect', undefined)).toEqual({ initialDelayMs: 500, maxDelayMs: 30_000 });
    expect(check.backoff('reconnect', { initialDelayMs: 60_000 })).toEqual({
      initialDelayMs: 60_000,
      maxDelayMs: 60_000,
    });
    expect(() => check.backoff('reconnect', { initialDelayMs: 1_000, maxDelayMs: 500 })).toThrow(
      /someConsumer: reconnect.maxDelayMs must be at least reconnect.initialDelayMs/,
    );
    expect(check.backoff('startRetry', { initialDelayMs: 0.5 }).initialDelayMs).toBe(0.5);
    expect(() => check.backoff('startRetry', { initialDelayMs: 0.5 }, true)).toThrow(
      /startRetry.initialDelayMs must be a positive integer/,
    );
  });
});

describe('transportLogger', () => {
  it("takes the transport's logger, else the handler's, else the silent one", () => {
    const own = { ...silentLogger };
    const handlers = { ...silentLogger };
    expect(transportLogger(own, { config: { logger: handlers } })).toBe(own);
    expect(transportLogger(undefined, { config: { logger: handlers } })).toBe(handlers);
    expect(transportLogger(undefined, { config: {} })).toBe(silentLogger);
    expect(transportLogger(undefined, undefined)).toBe(silentLogger);
  });
});

describe('settledWithin', () => {
  it('is true for a promise that settles (fulfilled or rejected) in time, false for one that does not', async () => {
    expect(await settledWithin(Promise.resolve(), 60_000)).toBe(true);
    expect(await settledWithin(Promise.reject(new Error('x')), 60_000)).toBe(true);
    expect(await settledWithin(new Promise(() => undefined), 1)).toBe(false);
  });
});
