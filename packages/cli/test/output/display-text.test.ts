// How the CLI prints values others chose: identifiers quoted and escaped unless plain, free text escaped, JSON
// escaped without changing its value.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import {
  displayName,
  displayText,
  escapeJsonText,
  hasUnsafeCharacters,
} from '../../src/output/display-text.js';

const strings = fc.string({ maxLength: 12, unit: 'binary' });

describe('displayName', () => {
  it.each([
    ['order-1', 'order-1'],
    ['ordre-é-1', 'ordre-é-1'],
    ['a"b\\c', 'a"b\\c'],
    ['', '""'],
    ['   ', '"   "'],
    ['a b', '"a b"'],
    ['"x"', '"\\"x\\""'],
    ['\u200b', '"\\u{200b}"'],
    ['\u200d\u2060\ufeff', '"\\u{200d}\\u{2060}\\u{feff}"'],
    ['pay\u202elp', '"pay\\u{202e}lp"'],
    ['\u061cx\u200ey\u200f', '"\\u{61c}x\\u{200e}y\\u{200f}"'],
    ['a\u001b[31mb', '"a\\u{1b}[31mb"'],
    ['a\u009bb', '"a\\u{9b}b"'],
    ['a\u007fb', '"a\\u{7f}b"'],
    ['a\nb\tc\r', '"a\\nb\\tc\\r"'],
    ['a\u2028b', '"a\\u{2028}b"'],
    ['a\u00a0b\u3000', '"a\\u{a0}b\\u{3000}"'],
    ['\u0301x', '"\\u{301}x"'],
    ['x\ufe0f', '"x\\u{fe0f}"'],
    ['\u3164', '"\\u{3164}"'],
    ['\u2800', '"\\u{2800}"'],
    ['\ud800', '"\\u{d800}"'],
  ])('%j → %s', (value, shown) => {
    expect(displayName(value)).toBe(shown);
  });

  it('never prints an unsafe character, and two different values never look the same', () => {
    fc.assert(
      fc.property(strings, strings, (a, b) => {
        expect(hasUnsafeCharacters(displayName(a))).toBe(false);
        if (a !== b) expect(displayName(a)).not.toBe(displayName(b));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('displayText', () => {
  it('escapes what is unsafe and leaves the rest, line breaks kept only when asked', () => {
    expect(displayText('relation "x" does not exist')).toBe('relation "x" does not exist');
    expect(displayText('a\u001b[2Jb\nc')).toBe('a\\u{1b}[2Jb\\nc');
    expect(displayText('a\u001b[2Jb\nc', { multiline: true })).toBe('a\\u{1b}[2Jb\nc');
    fc.assert(
      fc.property(strings, (text) => {
        expect(hasUnsafeCharacters(displayText(text))).toBe(false);
      }),
    );
  });
});

describe('escapeJsonText', () => {
  it('escapes unsafe characters in JSON strings, leaving the same value and the layout', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const json = JSON.stringify(value, null, 2);
        const escaped = escapeJsonText(json);
        expect(JSON.parse(escaped)).toEqual(JSON.parse(json));
        expect(hasUnsafeCharacters(escaped.replace(/\n/g, ''))).toBe(false);
      }),
      { numRuns: 500 },
    );
    expect(escapeJsonText(JSON.stringify({ id: 'a\u202eb\u{e0001}' }))).toBe(
      '{"id":"a\\u202eb\\udb40\\udc01"}',
    );
  });
});
