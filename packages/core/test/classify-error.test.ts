import { describe, expect, it } from 'vitest';
import { classifyError } from '../src/classify-error.js';
import { ConfigurationError, DecodeError, PermanentError, RetryableError, SchemaValidationError } from '../src/errors.js';

const coded = (code: string, message = code): Error => Object.assign(new Error(message), { code });

describe('classifyError', () => {
  it('dead-letters PermanentError, decode and schema errors', () => {
    expect(classifyError(new PermanentError('no')).retriable).toBe(false);
    expect(classifyError(new DecodeError('bad json')).retriable).toBe(false);
    expect(classifyError(new SchemaValidationError('bad', [])).retriable).toBe(false);
    expect(classifyError(new ConfigurationError('bad')).retriable).toBe(false);
  });

  it('retries RetryableError and honours its delay', () => {
    expect(classifyError(new RetryableError('later', { delayMs: 2_500 }))).toEqual({ retriable: true, delayMs: 2_500 });
    expect(classifyError(new RetryableError('later'))).toEqual({ retriable: true, delayMs: undefined });
  });

  it('retries unknown errors and non-errors', () => {
    expect(classifyError(new Error('who knows')).retriable).toBe(true);
    expect(classifyError('a string').retriable).toBe(true);
    expect(classifyError(undefined).retriable).toBe(true);
    expect(classifyError(Object.assign(new Error('x'), { name: 'AbortError' })).retriable).toBe(true);
  });

  it('treats programmer errors as permanent', () => {
    for (const e of [new TypeError('x is undefined'), new RangeError('r'), new ReferenceError('y'), new SyntaxError('s')]) {
      expect(classifyError(e).retriable).toBe(false);
    }
  });

  it('follows the cause chain: fetch failed with a connection reset is transient', () => {
    const fetchFailed = new TypeError('fetch failed', { cause: coded('ECONNRESET', 'read ECONNRESET') });
    expect(classifyError(fetchFailed).retriable).toBe(true);
    const deeper = new TypeError('fetch failed', { cause: new Error('socket', { cause: coded('UND_ERR_SOCKET') }) });
    expect(classifyError(deeper).retriable).toBe(true);
    const aggregate = new TypeError('fetch failed', {
      cause: new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], 'connect'),
    });
    expect(classifyError(aggregate).retriable).toBe(true);
    for (const code of ['ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', '40001', '40P01', '08006', '57P01']) {
      expect(classifyError(new TypeError('wrapped', { cause: coded(code) })).retriable).toBe(true);
    }
    expect(classifyError(new TypeError('fetch failed', { cause: new Error('invalid url') })).retriable).toBe(false);
  });

  it('survives cyclic causes', () => {
    const a = new TypeError('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(classifyError(a).retriable).toBe(false);
  });

  it('lets isRetriable override the built-in rules', () => {
    expect(classifyError(new TypeError('x'), () => true).retriable).toBe(true);
    expect(classifyError(new Error('x'), () => false).retriable).toBe(false);
    expect(classifyError(new RetryableError('x', { delayMs: 5 }), () => true)).toEqual({ retriable: true, delayMs: 5 });
  });
});
