// libpq's key/value connection strings (`host=db user=app password='a b\'c' dbname=app`), read the way libpq
// reads them, so the CLI can both connect with them and mask their secrets exactly where they are.

/** One `key=value` of a key/value connection string. */
export interface KeyValueEntry {
  readonly key: string;
  /** The value with quotes and backslash escapes resolved. */
  readonly value: string;
  /** Where the value is written in the text (quotes included): `[start, end)`. */
  readonly start: number;
  readonly end: number;
}

/** The result of `parseKeyValueConnectionString`. */
export interface ParsedKeyValueConnectionString {
  readonly entries: readonly KeyValueEntry[];
  /** What libpq would refuse (a word without `=`, an unterminated quote); absent when well-formed. */
  readonly error?: string | undefined;
}

const SPACE = /\s/;

/**
 * Reads a libpq key/value connection string: `key = value` pairs separated by whitespace; a value is either a
 * run of non-space characters or single-quoted, and `\` escapes the next character in both. Never throws: a
 * malformed string yields what could be read plus `error` (an unterminated quoted value runs to the end, so a
 * masker still finds all of it).
 *
 * @example
 * parseKeyValueConnectionString("host=db password='a b'").entries.map((e) => [e.key, e.value]);
 * // [['host', 'db'], ['password', 'a b']]
 */
export function parseKeyValueConnectionString(text: string): ParsedKeyValueConnectionString {
  const entries: KeyValueEntry[] = [];
  let error: string | undefined;
  let i = 0;
  const skipSpace = (): void => {
    while (i < text.length && SPACE.test(text[i]!)) i += 1;
  };
  while (true) {
    skipSpace();
    if (i >= text.length) break;
    const keyStart = i;
    while (i < text.length && text[i] !== '=' && !SPACE.test(text[i]!)) i += 1;
    const key = text.slice(keyStart, i);
    skipSpace();
    if (text[i] !== '=') {
      error ??= `missing "=" after ${JSON.stringify(key)}`;
      continue;
    }
    i += 1;
    skipSpace();
    const start = i;
    let value = '';
    if (text[i] === "'") {
      i += 1;
      let closed = false;
      while (i < text.length) {
        const c = text[i]!;
        if (c === '\\' && i + 1 < text.length) {
          value += text[i + 1];
          i += 2;
        } else if (c === "'") {
          i += 1;
          closed = true;
          break;
        } else {
          value += c;
          i += 1;
        }
      }
      if (!closed) error ??= `unterminated quoted value of ${JSON.stringify(key)}`;
    } else {
      while (i < text.length && !SPACE.test(text[i]!)) {
        if (text[i] === '\\' && i + 1 < text.length) {
          value += text[i + 1];
          i += 2;
        } else {
          value += text[i];
          i += 1;
        }
      }
    }
    entries.push({ key, value, start, end: i });
  }
  return { entries, error };
}
