// `--json` output: one JSON document on stdout, dates as ISO strings.

import type { OutputStream } from '../cli-io.js';

/** Writes `value` as indented JSON followed by a newline. */
export function writeJson(out: OutputStream, value: unknown): void {
  out.write(
    `${JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2)}\n`,
  );
}
