// The payload fingerprint: SHA-256 of a canonical JSON form, so the same intent re-encoded with keys in
// another order still matches, and a different payload under the same id is caught as `payload-mismatch`.

import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';

/**
 * Canonical JSON of `value`: object keys sorted (by UTF-16 code units), no whitespace, `toJSON` honoured,
 * `undefined`/functions/symbols dropped from objects and `null` in arrays, non-finite numbers `null` — the
 * same rules as `JSON.stringify`, with sorted keys. Bigints are written as decimal strings.
 */
export function canonicalJson(value: unknown): string {
  return write(value, []);
}

/** The canonical JSON of `value`; `ancestors` are the objects being written around it (a cycle throws). */
function write(value: unknown, ancestors: object[]): string {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON(): unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      // Number#toString is what JSON.stringify writes for a finite number (-0 included: "0").
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return `"${value.toString()}"`;
    case 'object':
      break;
    default:
      return 'null';
  }
  if (value === null) return 'null';
  if (ancestors.includes(value)) throw new TypeError('cannot fingerprint a cyclic payload');
  ancestors.push(value);
  let out: string;
  if (Array.isArray(value)) {
    out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      const item: unknown = value[i];
      const t = typeof item;
      out += item === undefined || t === 'function' || t === 'symbol' ? 'null' : write(item, ancestors);
    }
    out += ']';
  } else if (ArrayBuffer.isView(value)) {
    out = JSON.stringify(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64'));
  } else {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    out = '{';
    let first = true;
    for (const key of keys) {
      const item = record[key];
      const t = typeof item;
      if (item === undefined || t === 'function' || t === 'symbol') continue;
      if (!first) out += ',';
      first = false;
      out += `${JSON.stringify(key)}:${write(item, ancestors)}`;
    }
    out += '}';
  }
  ancestors.pop();
  return out;
}

/**
 * SHA-256 (lower-case hex) of the canonical JSON of a decoded payload.
 *
 * @example
 * fingerprintPayload({ b: 1, a: 2 }) === fingerprintPayload({ a: 2, b: 1 }) // true
 */
export function fingerprintPayload(payload: unknown): string {
  return sha256Hex(canonicalJson(payload));
}

/** One-shot SHA-256 (`crypto.hash`, Node 20.12+: no Hash object per call), else through a Hash object. */
const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (text) => (crypto as unknown as { hash(algorithm: string, data: string, encoding: 'hex'): string }).hash('sha256', text, 'hex')
    : (text) => createHash('sha256').update(text).digest('hex');
