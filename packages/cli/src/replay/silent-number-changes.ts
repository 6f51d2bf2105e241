// Edit and retry must publish what the operator wrote, and nothing they did not. JSON numbers beyond what a
// double holds (an account id of 19 digits, a decimal with 20 places) survive only as text: any tool that
// parses and re-serialises the payload — an editor pre-filled with `JSON.stringify(JSON.parse(body))` —
// rounds them silently (1234567890123456789 becomes 1234567890123456800), and the consumer gets another id.
// Such a change cannot have been made on purpose: the two numbers are the same number to JavaScript. This
// module finds them, so the edit is refused before anything is written.

/** A number whose text changed between the DLQ copy and the edited payload while its double stayed equal. */
export interface SilentNumberChange {
  /** Where it stands: `accountId`, `items[2].id`, `$` for the whole document. */
  readonly path: string;
  readonly from: string;
  readonly to: string;
}

/**
 * The numbers of `edited` that stand where `original` has a number with different text but the same double
 * value, written as JavaScript writes that double (`1234567890123456789` → `1234567890123456800`, `1.50` →
 * `1.5`): changes a re-serialisation makes and an operator does not. Empty when either text is not JSON (the payload check reports that).
 *
 * @example
 * silentNumberChanges('{"id":1234567890123456789,"n":-1}', '{"id":1234567890123456800,"n":1}');
 * // [{ path: 'id', from: '1234567890123456789', to: '1234567890123456800' }]
 */
export function silentNumberChanges(original: string, edited: string): SilentNumberChange[] {
  const before = numberLiterals(original);
  const after = numberLiterals(edited);
  if (before === undefined || after === undefined) return [];
  const changes: SilentNumberChange[] = [];
  for (const [path, to] of after) {
    const from = before.get(path);
    // What a re-serialisation writes: the shortest text of the same double. An operator who typed …790 over
    // …789 (the same double, but not its shortest text) meant it, and the consumer gets what they typed.
    if (from !== undefined && from !== to && Number(from) === Number(to) && to === JSON.stringify(Number(to)))
      changes.push({ path, from, to });
  }
  return changes;
}

/** Every number literal of a JSON text by its path, as written; `undefined` when the text is not JSON. */
export function numberLiterals(text: string): Map<string, string> | undefined {
  try {
    JSON.parse(text);
  } catch {
    return undefined;
  }
  const out = new Map<string, string>();
  let i = 0;
  const skipSpace = (): void => {
    while (i < text.length && ' \t\n\r\ufeff'.includes(text[i]!)) i += 1;
  };
  const readString = (): string => {
    const start = i;
    for (i += 1; text[i] !== '"'; i += 1) if (text[i] === '\\') i += 1;
    i += 1;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    skipSpace();
    const c = text[i];
    if (c === '{') {
      i += 1;
      skipSpace();
      if (text[i] === '}') {
        i += 1;
        return;
      }
      for (;;) {
        skipSpace();
        const key = readString();
        skipSpace();
        i += 1; // ':'
        value(path === '$' ? key : `${path}.${key}`);
        skipSpace();
        if (text[i++] === '}') return;
      }
    }
    if (c === '[') {
      i += 1;
      skipSpace();
      if (text[i] === ']') {
        i += 1;
        return;
      }
      for (let n = 0; ; n += 1) {
        value(`${path}[${n}]`);
        skipSpace();
        if (text[i++] === ']') return;
      }
    }
    if (c === '"') {
      readString();
      return;
    }
    const start = i;
    while (i < text.length && /[-+0-9.eEa-z]/.test(text[i]!)) i += 1;
    const literal = text.slice(start, i);
    if (/^-?[0-9]/.test(literal)) out.set(path, literal);
  };
  value('$');
  return out;
}
