// The start-up failure classifier a transport feeds with its own tables, and the backstop formula: the order of
// the rules and the defaults are core's; the tables and numbers are the transport's.

import { describe, expect, it } from 'vitest';
import {
  backstopLimit,
  ConfigurationError,
  isBackstop,
  PermanentError,
  RetryableError,
  startFailureClassifier,
  TRANSIENT,
} from '../../src/index.js';

const tables = {
  what: 'testConsumer',
  service: 'the broker',
  tlsHint: 'check the certificate',
  programmerHint: 'check the client',
  known: (error: unknown) =>
    (error as { code?: unknown }).code === 403
      ? new ConfigurationError('denied')
      : (error as { code?: unknown }).code === 503
        ? TRANSIENT
        : undefined,
  isTransient: (error: unknown) => (error as { code?: unknown }).code === 'THROTTLED',
};
const coded = (code: unknown, name = 'Error'): Error =>
  Object.assign(new Error(`failed ${String(code)}`), { code, name });

describe('startFailureClassifier', () => {
  it("reads the transport's table first: its error rejects, TRANSIENT retries", () => {
    const classify = startFailureClassifier({ ...tables, unknown: 'permanent' });
    expect(classify(coded(403))).toMatchObject({ message: 'denied' });
    expect(classify(coded(503))).toBeUndefined();
  });

  it('rejects a TLS failure anywhere in the cause chain with a ConfigurationError naming the service', () => {
    const classify = startFailureClassifier({ ...tables, unknown: 'transient' });
    const error = new Error('connect failed', { cause: coded('CERT_HAS_EXPIRED') });
    expect(classify(error)).toBeInstanceOf(ConfigurationError);
    expect(String((classify(error) as Error).message)).toMatch(
      /TLS handshake with the broker failed.*check the certificate/,
    );
  });

  it('rejects a non-retriable inboxkit error as it is, retries what isTransient says, and a programmer error says what to check', () => {
    const classify = startFailureClassifier({ ...tables, unknown: 'permanent', doing: 'connecting' });
    const permanent = new PermanentError('no');
    expect(classify(permanent)).toBe(permanent);
    expect(classify(new RetryableError('later'))).toBeInstanceOf(RetryableError); // unknown: permanent
    expect(classify(coded('THROTTLED'))).toBeUndefined();
    expect((classify(new TypeError('x is not a function')) as Error).message).toBe(
      'testConsumer: connecting failed with TypeError: x is not a function; retrying cannot fix that: check the client',
    );
  });

  it('applies the unknown default last', () => {
    expect(startFailureClassifier({ ...tables, unknown: 'transient' })(coded('EWHAT'))).toBeUndefined();
    const odd = coded('EWHAT');
    expect(startFailureClassifier({ ...tables, unknown: 'permanent' })(odd)).toBe(odd);
  });
});

describe('the broker backstop', () => {
  it('places the limit above maxAttempts by the headroom, never under the floor', () => {
    expect(backstopLimit(5, { headroom: (n) => Math.max(5, n) })).toBe(10);
    expect(backstopLimit(8, { headroom: (n) => Math.max(5, n) })).toBe(16);
    expect(backstopLimit(5, { headroom: 5, floor: 20 })).toBe(20);
    expect(backstopLimit(30, { headroom: 5, floor: 20 })).toBe(35);
  });

  it('accepts only an integer limit above maxAttempts', () => {
    expect(isBackstop(6, 5)).toBe(true);
    expect(isBackstop(5, 5)).toBe(false);
    expect(isBackstop(5.5, 5)).toBe(false);
  });
});
