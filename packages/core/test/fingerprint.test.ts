import { describe, expect, it } from 'vitest';
import { downstreamKey } from '../src/downstream-key.js';
import { canonicalJson, exactCanonicalJson, fingerprintJson, fingerprintPayload } from '../src/fingerprint.js';

/** The consumer's fingerprint of a JSON body with the default decoder. */
const ofText = (text: string): string => fingerprintJson(text, JSON.parse(text));

describe('fingerprint', () => {
  it('sorts keys at every depth and follows JSON.stringify otherwise', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}');
    expect(canonicalJson({ u: undefined, f: () => 1, arr: [undefined] })).toBe('{"arr":[null]}');
    // What JSON has no form for gets one no JSON text has, so it never equals something else.
    expect(canonicalJson({ n: NaN, i: -Infinity })).toBe('{"i":-Infinity,"n":NaN}');
    expect(canonicalJson(new Date('2024-01-02T03:04:05.000Z'))).toBe('"2024-01-02T03:04:05.000Z"');
    expect(canonicalJson('é"\n')).toBe(JSON.stringify('é"\n'));
    expect(canonicalJson(12n)).toBe('12');
  });

  it('gives the same fingerprint to the same payload in any key order, a different one otherwise', () => {
    expect(fingerprintPayload({ a: 1, b: 2 })).toBe(fingerprintPayload({ b: 2, a: 1 }));
    expect(fingerprintPayload({ a: 1, b: 2 })).not.toBe(fingerprintPayload({ a: 1, b: 3 }));
    expect(fingerprintPayload([1, 2])).not.toBe(fingerprintPayload([2, 1]));
    expect(fingerprintPayload({ a: 1 })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('tells apart JSON bodies that JSON.parse makes equal: big integers, overflowing numbers, duplicate members', () => {
    const pairs: [string, string][] = [
      ['{"n":9007199254740993}', '{"n":9007199254740992}'],
      ['{"id":12345678901234567890}', '{"id":12345678901234567000}'],
      ['{"x":1e400}', '{"x":null}'],
      ['{"x":1e400}', '{"x":1e401}'],
      ['{"x":-1e400}', '{"x":1e400}'],
      ['{"x":1e-400}', '{"x":0}'],
      ['{"x":0.1000000000000000055511151231257827}', '{"x":0.1}'],
      ['{"a":1,"a":2}', '{"a":2}'],
      ['[{"a":1,"a":1}]', '[{"a":1}]'],
    ];
    for (const [a, b] of pairs) {
      // Equal once through JSON.parse and back (what the fingerprint compared before)…
      expect(JSON.stringify(JSON.parse(a)), `${a} vs ${b}`).toBe(JSON.stringify(JSON.parse(b)));
      // …and told apart from the text now.
      expect(ofText(a), `${a} vs ${b}`).not.toBe(ofText(b));
    }
    // Duplicate members keep their order: the one JSON.parse keeps is the last.
    expect(ofText('{"a":1,"a":2}')).not.toBe(ofText('{"a":2,"a":1}'));
  });

  it('still treats re-encodings of the same JSON value as the same payload, exactly numbers included', () => {
    const same: [string, string][] = [
      ['{"a":1,"b":[1,2]}', '{ "b" : [1, 2], "a" : 1 }'],
      ['{"n":1.0}', '{"n":1}'],
      ['{"n":1e2}', '{"n":100}'],
      ['{"n":-0}', '{"n":0}'],
      ['{"s":"\u0041"}', '{"s":"A"}'],
      ['{"n":9007199254740993,"m":1}', '{"m":1,"n":9007199254740993}'],
      ['{"n":9007199254740993}', '{"n":9007199254740993.0}'],
      ['{"a":1,"a":2,"b":0}', '{"b":0,"a":1,"a":2}'],
      ['{"x":1e400}', '{"x":10e399}'],
    ];
    for (const [a, b] of same) expect(ofText(a), `${a} vs ${b}`).toBe(ofText(b));
  });

  it('keeps every fingerprint an earlier version recorded for a payload JSON.parse keeps whole', () => {
    // Computed with the canonical form of the previous release: rows recorded before an upgrade still match.
    const recorded: [string, string][] = [
      ['{"orderId":"o-1","amount":12.5,"items":[{"sku":"A","qty":2},{"sku":"B","qty":1}],"paid":true,"note":null}', 'b9617aa72d6cfe9f72d68151d8657f831ee492f0c80a2e5984f33869c979cdf4'],
      ['{"b":1,"a":{"d":[3,{"z":1,"y":2}],"c":null}}', '76aa76d553c645f69dc7fdd1677b11e51e7ea839d2d9a7e021b41af7d7cf5a06'],
      ['[1,-0,0.1,1e21,1.5e-7,9007199254740991,"é\\"\\n","\\u0041"]', '45df6d3eeccea4c6dda1a4cef79baf5c9728cc3cbb9eb11e109f537072c0949c'],
      ['{"emoji":"🚀","text":"日本","n":-12.75e3}', '5d53cc5cf0363bf31897e4da4ce7497fda5fc64293e9aa66dcba78d1524a1f53'],
      ['"just a string"', '3fe01def54b1c6cd795b2ebfcbab64150f6a507bce043040c662c682eebfed1e'],
      ['42', '73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049'],
    ];
    for (const [text, fingerprint] of recorded) {
      expect(ofText(text), text).toBe(fingerprint);
      expect(fingerprintPayload(JSON.parse(text)), text).toBe(fingerprint);
      // The text path agrees with the value path where both apply.
      expect(exactCanonicalJson(text)).toBe(canonicalJson(JSON.parse(text)));
    }
  });

  it('writes what a custom decoder returns faithfully: Map, Set, bigint, boxed and non-finite values', () => {
    const different: [unknown, unknown][] = [
      [new Map([['a', 1]]), new Map([['a', 2]])],
      [new Map([['a', 1]]), {}],
      [new Map([['a', 1]]), { a: 1 }],
      [new Set([1, 2]), new Set([1, 3])],
      [new Set([1]), [1]],
      [{ n: 12n }, { n: '12' }],
      [{ n: 9007199254740993n }, { n: 9007199254740992n }],
      [{ x: Infinity }, { x: null }],
      [{ x: NaN }, { x: null }],
      [{ x: -Infinity }, { x: Infinity }],
      [Object(5), {}],
    ];
    for (const [a, b] of different) expect(fingerprintPayload(a)).not.toBe(fingerprintPayload(b));
    expect(fingerprintPayload(new Map([['b', 2], ['a', 1]]))).toBe(fingerprintPayload(new Map([['a', 1], ['b', 2]])));
    expect(fingerprintPayload(new Set([2, 1]))).toBe(fingerprintPayload(new Set([1, 2])));
    expect(fingerprintPayload({ n: 12n })).toBe(fingerprintPayload({ n: 12 }));
    expect(canonicalJson(Object('x'))).toBe('"x"');
  });

  it('writes class instances by their enumerable properties, and refuses ones that show none', () => {
    class Dto {
      constructor(readonly amount: number) {}
    }
    expect(fingerprintPayload(new Dto(1))).not.toBe(fingerprintPayload(new Dto(2)));
    class Opaque {
      readonly #amount: number;
      constructor(amount: number) {
        this.#amount = amount;
      }
      get amount(): number {
        return this.#amount;
      }
    }
    expect(() => fingerprintPayload(new Opaque(1))).toThrow(/cannot fingerprint a Opaque faithfully/);
    expect(() => fingerprintPayload({ when: /x/ })).toThrow(/RegExp/);
    class WithJson {
      readonly #amount: number;
      constructor(amount: number) {
        this.#amount = amount;
      }
      toJSON(): unknown {
        return { amount: this.#amount };
      }
    }
    expect(fingerprintPayload(new WithJson(1))).not.toBe(fingerprintPayload(new WithJson(2)));
    expect(fingerprintPayload(Object.create(null) as object)).toBe(fingerprintPayload({}));
  });

  it('refuses cyclic payloads', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() => fingerprintPayload(cyclic)).toThrow(/cyclic/);
  });
});

describe('downstreamKey', () => {
  it('is a deterministic UUID per (consumer, message id)', () => {
    const key = downstreamKey('billing', 'order-1');
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(downstreamKey('billing', 'order-1')).toBe(key);
    expect(downstreamKey('billing', 'order-2')).not.toBe(key);
    expect(downstreamKey('shipping', 'order-1')).not.toBe(key);
    // The separator keeps ('a', 'bc') and ('ab', 'c') apart.
    expect(downstreamKey('a', 'bc')).not.toBe(downstreamKey('ab', 'c'));
  });
});
