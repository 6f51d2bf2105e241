// @ts-check
// How the CLI and the console page show text that anyone who can publish a message chose: message ids,
// consumer names, dead-letter reasons, error messages, payloads. Printed raw, an id of zero-width or
// bidi-control characters looks like nothing or like another id (`invoice-\u202egpj.exe` reads as
// `invoice-exe.jpg`), and an escape sequence rewrites the operator's terminal. One module for both: the CLI
// imports it (src/output/display-text.ts re-exports it) and the console serves it to the page as it is, so
// the terminal and the browser can never disagree about what an id looks like.
// Plain JavaScript with types in display-text.d.ts, because the page is served without a build step.

/**
 * Characters that are invisible, reorder or break the line, or drive the terminal: controls (C0 with ESC, DEL,
 * C1), format characters (bidi controls, zero-width space/joiners, BOM, tags), other default-ignorable code
 * points (variation selectors, Hangul fillers), line/paragraph separators, spaces other than U+0020,
 * surrogates, private-use and unassigned code points, and the blank Braille pattern.
 */
const UNSAFE =
  /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800\u3164\uFFA0\u115F\u1160]|(?! )\p{Zs}/u;
const UNSAFE_ALL = new RegExp(UNSAFE.source, 'gu');

/** @type {Readonly<Record<string, string>>} */
const NAMED = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** @param {string} c */
function escapeChar(c) {
  return NAMED[c] ?? `\\u{${/** @type {number} */ (c.codePointAt(0)).toString(16)}}`;
}

/**
 * True when `value` contains a character `displayText` would escape.
 * @param {string} value
 * @returns {boolean}
 */
export function hasUnsafeCharacters(value) {
  return UNSAFE.test(value);
}

/**
 * Free text (an error message, a detail, a payload) safe to show: every unsafe character becomes a visible
 * escape (`\n`, `\u{1b}`, `\u{202e}`); the rest is unchanged. With `multiline`, line breaks stay line breaks.
 *
 * @example
 * displayText('bad\u001b[2J id'); // 'bad\\u{1b}[2J id'
 * @param {string} text
 * @param {{ readonly multiline?: boolean }} [options]
 * @returns {string}
 */
export function displayText(text, options = {}) {
  return text.replace(UNSAFE_ALL, (c) => (options.multiline === true && c === '\n' ? c : escapeChar(c)));
}

/**
 * An identifier (message id, consumer, reason, queue) as shown: as it is when it is plain, else in double
 * quotes with `\`, `"` and every unsafe character escaped. Plain means non-empty, no whitespace, no unsafe
 * character, not starting with `"` or with a combining mark; so an id of spaces, of zero-width characters, or
 * with a bidi override can never pass for another id or for nothing.
 *
 * @example
 * displayName('order-1');   // 'order-1'
 * displayName('\u200b');    // '"\\u{200b}"'
 * displayName('  ');        // '"  "'
 * @param {string} value
 * @returns {string}
 */
export function displayName(value) {
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
 * @param {string} json
 * @returns {string}
 */
export function escapeJsonText(json) {
  return json.replace(UNSAFE_ALL, (c) => {
    // Inside strings JSON.stringify escaped these already; outside they are the document's own layout.
    if (c === '\n' || c === '\r' || c === '\t') return c;
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}
