// Plain aligned tables for a terminal, with colour only when the output is a TTY. Widths are measured on the
// plain text, so colour codes never break the alignment.

/** A colour the demo uses. */
export type Colour = 'green' | 'red' | 'yellow' | 'cyan' | 'dim' | 'bold';

const CODES: Record<Colour, [number, number]> = {
  green: [32, 39],
  red: [31, 39],
  yellow: [33, 39],
  cyan: [36, 39],
  dim: [2, 22],
  bold: [1, 22],
};

/** Paints text, or leaves it plain. */
export interface Painter {
  readonly enabled: boolean;
  paint(text: string, colour: Colour | undefined): string;
}

/** A painter that colours only when `enabled`. */
export function painter(enabled: boolean): Painter {
  return {
    enabled,
    paint: (text, colour) =>
      enabled && colour !== undefined && text.trim() !== ''
        ? `\u001b[${CODES[colour][0]}m${text}\u001b[${CODES[colour][1]}m`
        : text,
  };
}

/** True when stdout is a terminal that wants colour (NO_COLOR and FORCE_COLOR are honoured). */
export function colourWanted(stream: { readonly isTTY?: boolean } = process.stdout): boolean {
  if (process.env['NO_COLOR'] !== undefined && process.env['NO_COLOR'] !== '') return false;
  if (process.env['FORCE_COLOR'] !== undefined && process.env['FORCE_COLOR'] !== '0') return true;
  return stream.isTTY === true;
}

/** One cell: text, optionally coloured. */
export type Cell = string | number | { readonly text: string; readonly colour?: Colour | undefined };

/** A column: its header, alignment and the widest it may get (longer text is cut with …). */
export interface Column {
  readonly header: string;
  readonly align?: 'left' | 'right';
  readonly maxWidth?: number;
}

function textOf(cell: Cell): string {
  return typeof cell === 'object' ? cell.text : String(cell);
}

function colourOf(cell: Cell): Colour | undefined {
  return typeof cell === 'object' ? cell.colour : undefined;
}

function clip(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

/** Renders rows under a header and a rule, indented by `indent` spaces, columns three spaces apart. */
export function renderTable(
  columns: readonly Column[],
  rows: readonly (readonly Cell[])[],
  p: Painter,
  indent = 2,
): string[] {
  const widths = columns.map((column, i) => {
    const widest = Math.max(column.header.length, ...rows.map((row) => textOf(row[i] ?? '').length));
    return Math.min(widest, column.maxWidth ?? Number.MAX_SAFE_INTEGER);
  });
  const pad = ' '.repeat(indent);
  const line = (cells: readonly Cell[], header: boolean): string =>
    pad +
    columns
      .map((column, i) => {
        const cell = cells[i] ?? '';
        const text = clip(textOf(cell), widths[i]!);
        const last = i === columns.length - 1;
        const padded =
          column.align === 'right' ? text.padStart(widths[i]!) : last ? text : text.padEnd(widths[i]!);
        return header ? p.paint(padded, 'dim') : p.paint(padded, colourOf(cell));
      })
      .join('   ')
      .trimEnd();
  const ruleWidth = widths.reduce((sum, w) => sum + w, 0) + 3 * (columns.length - 1);
  return [
    line(
      columns.map((c) => c.header),
      true,
    ),
    pad + p.paint('─'.repeat(ruleWidth), 'dim'),
    ...rows.map((row) => line(row, false)),
  ];
}
