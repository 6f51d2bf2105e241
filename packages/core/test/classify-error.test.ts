import { describe, expect, it } from 'vitest';
import { classifyError, contentRejection, isPermanentDataError } from '../src/classify-error.js';
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

  it('treats Postgres data errors (class 22, and 23000, 23502, 23514) as permanent, wherever they are in the chain', () => {
    for (const code of ['22P02', '22P05', '22001', '22003', '22007', '22008', '22012', '22021', '23000', '23502', '23514']) {
      const pgError = Object.assign(new Error(code), { code, severity: 'ERROR' });
      expect(classifyError(pgError).retriable, code).toBe(false);
      expect(classifyError(new Error('wrapped', { cause: pgError })).retriable, `${code} wrapped`).toBe(false);
      expect(isPermanentDataError(pgError), code).toBe(true);
    }
  });

  it('keeps the constraint violations another writer can resolve retriable: 23503, 23505, 23P01, 23001', () => {
    for (const code of ['23503', '23505', '23P01', '23001']) {
      expect(classifyError(coded(code)).retriable, code).toBe(true);
      expect(isPermanentDataError(coded(code)), code).toBe(false);
    }
  });

  it('lets isRetriable, a RetryableError wrapper or a transient link override a data error', () => {
    expect(classifyError(coded('22P02'), () => true).retriable).toBe(true);
    expect(classifyError(new RetryableError('retry it', { cause: coded('22P02') })).retriable).toBe(true);
    expect(classifyError(new Error('x', { cause: new AggregateError([coded('22P02'), coded('57P01')]) })).retriable).toBe(true);
  });

  it('does not take other five-character codes for SQLSTATEs', () => {
    expect(classifyError(coded('22abc')).retriable).toBe(true);
    expect(classifyError(coded('E2201')).retriable).toBe(true);
  });

  it('falls back to the built-in rules when isRetriable throws, and says so', () => {
    const thrown = new Error('classifier bug');
    const verdict = classifyError(new TypeError('x'), () => {
      throw thrown;
    });
    expect(verdict).toEqual({ retriable: false, delayMs: undefined, classifierError: thrown });
    expect(classifyError(new Error('x'), () => {
      throw thrown;
    }).retriable).toBe(true);
  });

  it('retries an error whose properties throw when read', () => {
    const hostile = new Proxy(new Error('x'), {
      get() {
        throw new Error('trap');
      },
    });
    expect(classifyError(hostile).retriable).toBe(true);
  });

  it('tells a store refusing content (class 22, 54) from an outage', () => {
    expect(contentRejection(new Error('store failed', { cause: coded('22P02') }))).toBe('22P02');
    expect(contentRejection(new Error('store failed', { cause: coded('54000') }))).toBe('54000');
    for (const outage of ['08006', '57P01', '57P03', '53300', 'ECONNREFUSED', '23505', '40001']) {
      expect(contentRejection(new Error('store failed', { cause: coded(outage) })), outage).toBeUndefined();
    }
  });

  it('lets isRetriable override the built-in rules', () => {
    expect(classifyError(new TypeError('x'), () => true).retriable).toBe(true);
    expect(classifyError(new Error('x'), () => false).retriable).toBe(false);
    expect(classifyError(new RetryableError('x', { delayMs: 5 }), () => true)).toEqual({ retriable: true, delayMs: 5 });
  });
});
