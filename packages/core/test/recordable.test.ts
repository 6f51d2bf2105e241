// What core hands to stores and brokers is recordable whatever a handler threw or a sender put in a header:
// no lone surrogate, no NUL, no date Postgres cannot parse. Checked through the functions every path uses.

import { describe, expect, it } from 'vitest';
import { deadLetterHeaders, HEADERS, parseReplayMarker } from '../src/dead-letter-record.js';
import { toErrorInfo } from '../src/error-info.js';
import { clipText, recordableDate, recordableText } from '../src/recordable.js';

/** True when `text` holds no lone surrogate and no NUL. */
const wellFormed = (text: string): boolean =>
  // eslint-disable-next-line no-control-regex -- NUL is one of the characters this looks for
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\u0000/.test(text);

describe('recordable values', () => {
  it('replaces lone surrogates and NUL by U+FFFD and keeps pairs, other controls and everything else', () => {
    expect(recordableText('a\uD800b\uDC00c\u0000d')).toBe('a\uFFFDb\uFFFDc\uFFFDd');
    expect(recordableText('\uDC00\uD800')).toBe('\uFFFD\uFFFD');
    expect(recordableText('🚀 ok\t\n\u0001')).toBe('🚀 ok\t\n\u0001');
    expect(recordableText('end\uD83D')).toBe('end\uFFFD');
  });

  it('clips without cutting a surrogate pair', () => {
    expect(clipText('abcdef', 4)).toBe('abc…');
    expect(clipText('ab🚀cd', 4)).toBe('ab…');
    expect(clipText('abc', 3)).toBe('abc');
    expect(wellFormed(clipText('a'.repeat(9) + '🚀'.repeat(5), 11))).toBe(true);
  });

  it('clamps dates to years 1–9999 and drops invalid ones', () => {
    expect(recordableDate(new Date(-8e15))?.toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(recordableDate(new Date(8e15))?.toISOString()).toBe('9999-12-31T23:59:59.999Z');
    const now = new Date();
    expect(recordableDate(now)).toBe(now);
    expect(recordableDate(new Date(Number.NaN))).toBeUndefined();
    expect(recordableDate('2024-01-01')).toBeUndefined();
  });

  it('makes every field of an error recordable and bounded, and never throws', () => {
    const e = Object.assign(new Error(`bad \uD800 ${'x'.repeat(5_000)}`), { code: 'C\u0000' });
    e.name = 'N\uDFFF';
    e.stack = `N: ${'y'.repeat(10_000)}\uD800\n${'  at f\n'.repeat(20)}`;
    const info = toErrorInfo(e);
    for (const value of Object.values(info)) expect(wellFormed(value as string)).toBe(true);
    expect(info.message.length).toBeLessThanOrEqual(2_000);
    expect(info.stack!.length).toBeLessThanOrEqual(4_000);
    expect(info.name).toBe('N\uFFFD');
    expect(info.code).toBe('C\uFFFD');
    const hostile = new Proxy(
      {},
      {
        has: () => true,
        get: () => {
          throw new Error('trap');
        },
      },
    );
    expect(toErrorInfo(hostile)).toMatchObject({ name: 'Error' });
    expect(toErrorInfo('plain \uD800')).toEqual({ name: 'string', message: 'plain \uFFFD' });
  });

  it('writes dead-letter headers that every broker encodes: no lone surrogate, no NUL, in any value', () => {
    const headers = deadLetterHeaders({
      originalId: 'id-1',
      consumer: 'c',
      reason: 'permanent-error\u0000',
      attempts: 1,
      error: { name: 'E\uD800', message: 'm\uDC00', code: '\u0000', stack: 's\uD800' },
      firstFailureAt: undefined,
      lastFailureAt: undefined,
      deadLetteredAt: new Date(0),
      source: { transport: 'memory', destination: 'q\uD800', routingKey: 'k\u0000' },
    });
    for (const value of Object.values(headers)) expect(wellFormed(value)).toBe(true);
    expect(headers[HEADERS.errorMessage]).toBe('m\uFFFD');
    expect(headers[HEADERS.sourceDestination]).toBe('q\uFFFD');
  });

  it('reads a replay marker into recordable values', () => {
    const marker = parseReplayMarker({
      [HEADERS.replayId]: 'r\uD800',
      [HEADERS.replayBy]: 'ops\u0000',
      [HEADERS.replayAt]: '+275000-01-01T00:00:00.000Z',
    });
    expect(marker).toEqual({
      replayId: 'r\uFFFD',
      requestedBy: 'ops\uFFFD',
      requestedAt: new Date('9999-12-31T23:59:59.999Z'),
    });
  });
});
