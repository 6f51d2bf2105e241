// The payload fingerprint: SHA-256 of a canonical JSON form, so the same intent re-encoded with keys in
// another order still matches, and a different payload under the same id is caught as `payload-mismatch`.
//
// "The same payload" means the same JSON value, compared exactly: members in any order, any whitespace, any
// string escapes (`"\u0041"` is `"A"`), numbers by their exact decimal value (`1.0` is `1`, `1e2` is `100`).
// For a JSON body the canonical form is computed from the text, so what `JSON.parse` cannot keep still counts:
// an integer beyond 2^53, a number beyond the double range (`1e400` is not `null`), a duplicate member
// (`{"a":1,"a":2}` is not `{"a":2}`). Where `JSON.parse` keeps everything — nearly every payload — the form is
// exactly the one earlier versions wrote, so fingerprints recorded before an upgrade still match.

import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';

/**
 * Canonical JSON of a decoded `value`: object keys sorted (by UTF-16 code units), no whitespace, `toJSON`
 * honoured, `undefined`/functions/symbols dropped from objects and `null` in arrays — the rules of
 * `JSON.stringify`, with sorted keys. What JSON has no form for is written in a form no JSON text has, so it
 * never equals something else: a bigint as its digits (`12n` is the number `12`), `NaN`, `Infinity`,
 * `-Infinity`, a `Map` as `Map([[key,value],…])` sorted by key, a `Set` as `Set([…])` sorted, a boxed primitive
 * as its primitive. An object that is neither plain, an array, a typed array, a `Map`/`Set` nor has `toJSON()`
 * is written by its own enumerable properties when it has some; one with none (a `RegExp`, an instance that
 * keeps its state in private fields) cannot be fingerprinted faithfully, and throws a `TypeError` (the
 * consumer dead-letters it as `undecodable`: return plain data or give the class a `toJSON()`).
 */
export function canonicalJson(value: unknown): string {
  return write(value, []);
}

/** The canonical JSON of `value`; `ancestors` are the objects being written around it (a cycle throws). */
function write(value: unknown, ancestors: object[]): string {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON(): unknown }).toJSON();
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean || value instanceof BigInt) {
    value = value.valueOf();
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      // Number#toString is what JSON.stringify writes for a finite number (-0 included: "0"); for NaN and the
      // infinities it writes a token no JSON text has, where JSON.stringify would write null.
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return value.toString();
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
  } else if (value instanceof Map) {
    const entries = [...value.entries()].map(([k, v]) => [write(k, ancestors), write(v, ancestors)] as const);
    entries.sort((a, b) => compare(a[0], b[0]) || compare(a[1], b[1]));
    out = `Map([${entries.map(([k, v]) => `[${k},${v}]`).join(',')}])`;
  } else if (value instanceof Set) {
    out = `Set([${[...value].map((v) => write(v, ancestors)).sort(compare).join(',')}])`;
  } else {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    const proto: unknown = Object.getPrototypeOf(value);
    if (keys.length === 0 && proto !== Object.prototype && proto !== null) {
      const kind = (value as { constructor?: { name?: unknown } }).constructor?.name;
      throw new TypeError(
        `cannot fingerprint a ${typeof kind === 'string' && kind !== '' ? kind : 'non-plain object'} faithfully: it has no enumerable properties and no toJSON(); decode to plain data or give it a toJSON()`,
      );
    }
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

/** UTF-16 code unit order, as `Array#sort` without a comparator. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * SHA-256 (lower-case hex) of the canonical JSON of a decoded payload: what the consumer compares when a
 * custom `decode` turned the body into `payload`.
 *
 * @example
 * fingerprintPayload({ b: 1, a: 2 }) === fingerprintPayload({ a: 2, b: 1 }) // true
 */
export function fingerprintPayload(payload: unknown): string {
  return sha256Hex(canonicalJson(payload));
}

/**
 * SHA-256 (lower-case hex) of the canonical form of the JSON text `text`, whose `JSON.parse` is `value`: what
 * the consumer compares for the default JSON decoder. Equal to `fingerprintPayload(value)` whenever `value`
 * holds everything the text says; otherwise (a number `JSON.parse` rounds or overflows, a duplicate member) the
 * canonical form is computed from the text itself (`exactCanonicalJson`), so those differences count.
 *
 * @example
 * fingerprintJson('{"n":9007199254740993}', JSON.parse('{"n":9007199254740993}'))
 *   !== fingerprintJson('{"n":9007199254740992}', JSON.parse('{"n":9007199254740992}')) // true
 */
export function fingerprintJson(text: string, value: unknown): string {
  return sha256Hex(parseKeepsEverything(text, value) ? canonicalJson(value) : exactCanonicalJson(text));
}

/**
 * True when `JSON.parse(text)` (given as `value`) kept every number's value and every member: one scan of the
 * text checks each number and counts the members, compared with the members `value` holds.
 */
function parseKeepsEverything(text: string, value: unknown): boolean {
  let members = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string: to the next quote not escaped.
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x3a) {
      members++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      while (end < n && isNumberChar(text.charCodeAt(end))) end++;
      if (!numberIsKept(text.slice(i, end))) return false;
      i = end - 1;
    }
  }
  return members === countMembers(value);
}

function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}

/** Members of every object in a JSON.parse result. */
function countMembers(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  let count = 0;
  if (Array.isArray(value)) {
    for (const item of value) count += countMembers(item);
    return count;
  }
  for (const key of Object.keys(value)) count += 1 + countMembers((value as Record<string, unknown>)[key]);
  return count;
}

/** True when the JSON number `lexeme` has exactly the value of the double JSON.parse makes of it, as printed. */
function numberIsKept(lexeme: string): boolean {
  const parsed = Number(lexeme);
  if (!Number.isFinite(parsed)) return false;
  const printed = String(parsed);
  return printed === lexeme || exactDecimal(printed) === exactDecimal(lexeme);
}

/**
 * A decimal number's exact value in one spelling: sign, significant digits without leading or trailing zeros,
 * `e` and the exponent (`1.50e1` → `15e0`, `-0.0` → `0`). Two spellings of the same value give the same string.
 */
function exactDecimal(lexeme: string): string {
  const match = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(lexeme);
  if (match === null) return lexeme;
  const [, sign, int = '', frac = '', exp = '0'] = match;
  let digits = int + frac;
  let exponent = BigInt(exp) - BigInt(frac.length);
  digits = digits.replace(/^0+/, '');
  if (digits === '') return '0';
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += BigInt(trailing);
  return `${sign}${digits}e${exponent}`;
}

/**
 * The canonical form of a JSON text, computed from the text: as `canonicalJson(JSON.parse(text))` except that
 * numbers `JSON.parse` would round or overflow are written by their exact value (`exactDecimal`, a spelling
 * `String(number)` never produces), and duplicate members are all kept, in their order, after sorting by key.
 * Throws a `SyntaxError` on text that is not JSON.
 */
export function exactCanonicalJson(text: string): string {
  const reader = new JsonTextReader(text);
  const out = reader.value();
  reader.end();
  return out;
}

/** A recursive-descent reader that writes canonical JSON as it reads. */
class JsonTextReader {
  #i = 0;
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  value(): string {
    this.#space();
    const c = this.#text[this.#i];
    if (c === '{') return this.#object();
    if (c === '[') return this.#array();
    if (c === '"') return JSON.stringify(this.#string());
    if (c === 't' || c === 'f' || c === 'n') return this.#literal();
    return this.#number();
  }

  end(): void {
    this.#space();
    if (this.#i !== this.#text.length) throw new SyntaxError(`unexpected text at position ${this.#i}`);
  }

  #object(): string {
    this.#i++;
    const members: { key: string; text: string }[] = [];
    this.#space();
    if (this.#text[this.#i] === '}') {
      this.#i++;
      return '{}';
    }
    for (;;) {
      this.#space();
      const key = this.#string();
      this.#space();
      this.#expect(':');
      members.push({ key, text: `${JSON.stringify(key)}:${this.value()}` });
      this.#space();
      if (this.#text[this.#i] === ',') this.#i++;
      else break;
    }
    this.#expect('}');
    // Stable: duplicate keys keep their order, so {"a":1,"a":2} and {"a":2,"a":1} differ, as their meaning does.
    members.sort((a, b) => compare(a.key, b.key));
    return `{${members.map((m) => m.text).join(',')}}`;
  }

  #array(): string {
    this.#i++;
    const items: string[] = [];
    this.#space();
    if (this.#text[this.#i] === ']') {
      this.#i++;
      return '[]';
    }
    for (;;) {
      items.push(this.value());
      this.#space();
      if (this.#text[this.#i] === ',') this.#i++;
      else break;
    }
    this.#expect(']');
    return `[${items.join(',')}]`;
  }

  #string(): string {
    const start = this.#i;
    if (this.#text[this.#i] !== '"') throw new SyntaxError(`expected a string at position ${start}`);
    for (this.#i++; this.#i < this.#text.length; this.#i++) {
      const c = this.#text[this.#i];
      if (c === '\\') this.#i++;
      else if (c === '"') break;
    }
    this.#i++;
    return JSON.parse(this.#text.slice(start, this.#i)) as string;
  }

  #literal(): string {
    for (const word of ['true', 'false', 'null']) {
      if (this.#text.startsWith(word, this.#i)) {
        this.#i += word.length;
        return word;
      }
    }
    throw new SyntaxError(`unexpected token at position ${this.#i}`);
  }

  #number(): string {
    const start = this.#i;
    while (this.#i < this.#text.length && isNumberChar(this.#text.charCodeAt(this.#i))) this.#i++;
    const lexeme = this.#text.slice(start, this.#i);
    if (!/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(lexeme)) throw new SyntaxError(`bad number at position ${start}`);
    return numberIsKept(lexeme) ? String(Number(lexeme)) : exactDecimal(lexeme);
  }

  #space(): void {
    while (this.#i < this.#text.length) {
      const c = this.#text.charCodeAt(this.#i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.#i++;
    }
  }

  #expect(char: string): void {
    if (this.#text[this.#i] !== char) throw new SyntaxError(`expected ${char} at position ${this.#i}`);
    this.#i++;
  }
}

/** One-shot SHA-256 (`crypto.hash`, Node 20.12+: no Hash object per call), else through a Hash object. */
const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (text) => (crypto as unknown as { hash(algorithm: string, data: string, encoding: 'hex'): string }).hash('sha256', text, 'hex')
    : (text) => createHash('sha256').update(text).digest('hex');
