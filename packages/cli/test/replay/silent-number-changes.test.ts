import { describe, expect, it } from 'vitest';

import { numberLiterals, silentNumberChanges } from '../../src/replay/silent-number-changes.js';

describe('silentNumberChanges', () => {
  it('finds a number a re-serialisation rounded, by its path', () => {
    const original = '{"id":1234567890123456789,"n":-1,"items":[{"ref":9007199254740993}]}';
    const edited = JSON.stringify({ ...JSON.parse(original), n: 1 });
    expect(silentNumberChanges(original, edited)).toEqual([
      { path: 'id', from: '1234567890123456789', to: '1234567890123456800' },
      { path: 'items[0].ref', from: '9007199254740993', to: '9007199254740992' },
    ]);
  });

  it('lets through what the operator changed, and the original text edited in place', () => {
    const original = '{"id":1234567890123456789,"n":-1}';
    expect(silentNumberChanges(original, original.replace('-1', '1'))).toEqual([]);
    expect(silentNumberChanges(original, '{"id":1234567890123456790,"n":1}')).toEqual([]);
    expect(silentNumberChanges(original, 'not json')).toEqual([]);
  });

  it('reads number literals as written, strings with brackets and escapes skipped', () => {
    expect([...numberLiterals('[ 1.50, "a\\"],{", {"k": -2e3, "e": {}} ]')!]).toEqual([
      ['$[0]', '1.50'],
      ['$[2].k', '-2e3'],
    ]);
  });
});
