// The payload fingerprint: SHA-256 of a canonical JSON form, so the same intent re-encoded with keys in
// another order still matches, and a different payload under the same id is caught as `payload-mismatch`.

import { createHash } from 'node:crypto';

/**
 * Canonical JSON of `value`: object keys sorted (by UTF-16 code units), no whitespace, `toJSON` honoured,
 * `undefined`/functions/symbols dropped from objects and `null` in arrays, non-finite numbers `null` — the
 * same rules as `JSON.stringify`, with sorted keys. Bigints are written as decimal strings.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  write(value, out, new Set());
  return out.join('');
}

function write(value: unknown, out: string[], seen: Set<object>): void {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON(): unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
      out.push(JSON.stringify(value));
      return;
    case 'number':
      out.push(Number.isFinite(value) ? JSON.stringify(value) : 'null');
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'bigint':
      out.push(JSON.stringify(value.toString()));
      return;
    case 'object':
      break;
    default:
      out.push('null');
      return;
  }
  if (value === null) {
    out.push('null');
    return;
  }
  if (seen.has(value)) throw new TypeError('cannot fingerprint a cyclic payload');
  seen.add(value);
  if (Array.isArray(value)) {
    out.push('[');
    value.forEach((item, i) => {
      if (i > 0) out.push(',');
      const t = typeof item;
      if (item === undefined || t === 'function' || t === 'symbol') out.push('null');
      else write(item, out, seen);
    });
    out.push(']');
  } else if (ArrayBuffer.isView(value)) {
    out.push(JSON.stringify(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64')));
  } else {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    out.push('{');
    let first = true;
    for (const key of keys) {
      const item = record[key];
      const t = typeof item;
      if (item === undefined || t === 'function' || t === 'symbol') continue;
      if (!first) out.push(',');
      first = false;
      out.push(JSON.stringify(key), ':');
      write(item, out, seen);
    }
    out.push('}');
  }
  seen.delete(value);
}

/**
 * SHA-256 (lower-case hex) of the canonical JSON of a decoded payload.
 *
 * @example
 * fingerprintPayload({ b: 1, a: 2 }) === fingerprintPayload({ a: 2, b: 1 }) // true
 */
export function fingerprintPayload(payload: unknown): string {
  return createHash('sha256').update(canonicalJson(payload)).digest('hex');
}
