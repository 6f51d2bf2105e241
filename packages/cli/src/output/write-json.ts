// `--json` output: one JSON document on stdout, dates as ISO strings.

import type { OutputStream } from '../cli-io.js';
import { escapeJsonText } from './display-text.js';

/**
 * Writes `value` as indented JSON followed by a newline. Invisible, bidi and control characters in strings are
 * written as `\uXXXX` escapes: the same value once parsed, but harmless when read on a terminal.
 */
export function writeJson(out: OutputStream, value: unknown): void {
  out.write(
    `${escapeJsonText(JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2))}\n`,
  );
}
