// Plain-text tables for terminal output: left-aligned text, right-aligned numbers, no colours (they would
// end up in logs and CI output). Every cell is printed through displayText, so no value can break the table's
// lines, hide itself or drive the terminal.

import { displayText } from './display-text.js';

/**
 * Renders `rows` under `header`, columns padded to their widest cell. Numeric columns align right. Control,
 * invisible and bidi characters in cells are escaped (`displayText`); quote identifiers with `displayName`
 * before.
 */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const cells = rows.map((row) => header.map((_, i) => displayText(String(row[i] ?? ''))));
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((row) => typeof row[i] === 'number'));
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((row) => row[i]!.length)));
  const line = (row: readonly string[]): string =>
    row
      .map((cell, i) => (numeric[i] ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n') + '\n';
}

/** Shortens `text` to `max` characters with an ellipsis. */
export function truncate(text: string, max: number): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > max ? `${oneLine.slice(0, Math.max(0, max - 1))}…` : oneLine;
}
