import { describe, expect, it } from 'vitest';
import { downstreamKey } from '../src/downstream-key.js';
import { canonicalJson, fingerprintPayload } from '../src/fingerprint.js';

describe('fingerprint', () => {
  it('sorts keys at every depth and follows JSON.stringify otherwise', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}');
    expect(canonicalJson({ u: undefined, f: () => 1, n: NaN, arr: [undefined] })).toBe('{"arr":[null],"n":null}');
    expect(canonicalJson(new Date('2024-01-02T03:04:05.000Z'))).toBe('"2024-01-02T03:04:05.000Z"');
    expect(canonicalJson('é"\n')).toBe(JSON.stringify('é"\n'));
    expect(canonicalJson(12n)).toBe('"12"');
  });

  it('gives the same fingerprint to the same payload in any key order, a different one otherwise', () => {
    expect(fingerprintPayload({ a: 1, b: 2 })).toBe(fingerprintPayload({ b: 2, a: 1 }));
    expect(fingerprintPayload({ a: 1, b: 2 })).not.toBe(fingerprintPayload({ a: 1, b: 3 }));
    expect(fingerprintPayload([1, 2])).not.toBe(fingerprintPayload([2, 1]));
    expect(fingerprintPayload({ a: 1 })).toMatch(/^[0-9a-f]{64}$/);
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
