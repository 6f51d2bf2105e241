// Values the CLI prints come from message ids, consumer names, dead-letter reasons and error messages that
// anyone who can publish a message chose. Printed raw, an id of zero-width or bidi-control characters looks
// like nothing or like another id, and an escape sequence rewrites the operator's terminal. Every such value is
// printed through these functions.

/**
 * Characters that are invisible, reorder or break the line, or drive the terminal: controls (C0 with ESC, DEL,
 * C1), format characters (bidi controls, zero-width space/joiners, BOM, tags), other default-ignorable code
 * points (variation selectors, Hangul fillers), line/paragraph separators, spaces other than U+0020,
 * surrogates, private-use and unassigned code points, and the blank Braille pattern.
 */
const UNSAFE =
  /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800\u3164\uFFA0\u115F\u1160]|(?! )\p{Zs}/u;
const UNSAFE_ALL = new RegExp(UNSAFE.source, 'gu');

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeChar(c: string): string {
  return NAMED[c] ?? `\\u{${c.codePointAt(0)!.toString(16)}}`;
}

/** True when `value` contains a character `displayText` would escape. */
export function hasUnsafeCharacters(value: string): boolean {
  return UNSAFE.test(value);
}

/**
 * Free text (an error message, a detail) safe to print: every unsafe character becomes a visible escape
 * (`\n`, `\u{1b}`, `\u{202e}`); the rest is unchanged. With `multiline`, line breaks stay line breaks.
 *
 * @example
 * displayText('bad\u001b[2J id'); // 'bad\\u{1b}[2J id'
 */
export function displayText(text: string, options: { readonly multiline?: boolean } = {}): string {
  return text.replace(UNSAFE_ALL, (c) => (options.multiline === true && c === '\n' ? c : escapeChar(c)));
}

/**
 * An identifier (message id, consumer, reason, queue) as the CLI prints it: as it is when it is plain, else in
 * double quotes with `\`, `"` and every unsafe character escaped. Plain means non-empty, no whitespace, no
 * unsafe character, not starting with `"` or with a combining mark; so an id of spaces, of zero-width
 * characters, or with a bidi override can never pass for another id or for nothing.
 *
 * @example
 * displayName('order-1');   // 'order-1'
 * displayName('\u200b');    // '"\\u{200b}"'
 * displayName('  ');        // '"  "'
 */
export function displayName(value: string): string {
  if (value !== '' && !/\s/u.test(value) && !UNSAFE.test(value) && !/^["\p{M}]/u.test(value)) return value;
  let out = '';
  let first = true;
  for (const c of value) {
    if (c === '\\' || c === '"') out += `\\${c}`;
    else if (UNSAFE.test(c) || (first && /\p{M}/u.test(c))) out += escapeChar(c);
    else out += c;
    first = false;
  }
  return `"${out}"`;
}

/**
 * JSON text with every unsafe character inside its strings written as a `\uXXXX` escape: the same JSON value,
 * but one that cannot reorder or hide text, or drive a terminal, when `--json` output is read on one.
 */
export function escapeJsonText(json: string): string {
  return json.replace(UNSAFE_ALL, (c) => {
    // Inside strings JSON.stringify escaped these already; outside they are the document's own layout.
    if (c === '\n' || c === '\r' || c === '\t') return c;
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}
