// Reading figures out of the packages' own bench scripts, which print for people, not for machines. Each reader
// is tolerant: what it cannot find is left out of the summary, and the report always carries the raw output.

/** One consumer variant's line: a name, messages (or deliveries) per second, and latency if printed. */
export interface RateRow {
  readonly label: string;
  readonly perSecond: number;
  readonly p50?: number;
  readonly p99?: number;
}

/** One "ratio" the script printed, with the target it states. */
export interface RatioLine {
  readonly label: string;
  readonly value: number;
  readonly target?: number;
}

const num = (s: string): number => Number(s.replace(/,/g, ''));

/**
 * Lines like `  plain eachMessage   471 msg/s   p50 26.9 ms   p99 384.6 ms` or markdown rows
 * `| plain consumer | 202 | 27 | 114 |` (from a table whose header names msg/s, p50 and p99). Section
 * headings (an unindented line without figures) prefix the labels.
 */
export function rateRows(output: string): RateRow[] {
  const rows: RateRow[] = [];
  let section = '';
  let columns: string[] | undefined;
  for (const raw of output.split('\n')) {
    const line = raw.replace(/\s+$/, '');
    if (line.startsWith('|')) {
      const cells = line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim());
      if (cells.every((c) => /^:?-+:?$/.test(c))) continue;
      if (cells.slice(1).some((c) => /msg\/s|deliveries\/s/i.test(c))) {
        columns = cells.map((c) => c.toLowerCase());
        continue;
      }
      if (columns === undefined) continue;
      const rate = columns.findIndex((c) => /msg\/s|deliveries\/s/.test(c));
      const p50 = columns.findIndex((c) => /p50/.test(c));
      const p99 = columns.findIndex((c) => /p99/.test(c));
      const value = cells[rate];
      if (value === undefined || !/^[\d,.]+$/.test(value)) continue;
      rows.push({
        label: cells[0]!,
        perSecond: num(value),
        ...(p50 >= 0 && /^[\d.]+$/.test(cells[p50] ?? '') ? { p50: num(cells[p50]!) } : {}),
        ...(p99 >= 0 && /^[\d.]+$/.test(cells[p99] ?? '') ? { p99: num(cells[p99]!) } : {}),
      });
      continue;
    }
    columns = undefined;
    const m = /^\s*(.*?)\s+([\d,]+(?:\.\d+)?)\s*msg\/s\b(.*)$/.exec(line);
    if (m !== null && m[1]!.trim() !== '' && !/ratio|^round\b/i.test(m[1]!.trim())) {
      const rest = m[3]!;
      const p50 = /p50\s+([\d.]+)\s*ms/.exec(rest)?.[1];
      const p99 = /p99\s+([\d.]+)\s*ms/.exec(rest)?.[1];
      rows.push({
        label: `${section ? `${section}: ` : ''}${m[1]!.trim()}`,
        perSecond: num(m[2]!),
        ...(p50 !== undefined ? { p50: num(p50) } : {}),
        ...(p99 !== undefined ? { p99: num(p99) } : {}),
      });
      continue;
    }
    if (/^[A-Za-z]/.test(line) && !/\d/.test(line) && line.length < 60)
      section = line.replace(/:$/, '').trim();
  }
  return rows;
}

/**
 * Lines that state a ratio against the plain consumer: `ratio 0.46× (target ≥ 0.85×)` (under a section
 * heading), `prefetch 16  inbox/plain 0.80× (target ≥ 0.85×)`, or several on one line,
 * `ratio inbox/plain: message mode 0.77, batch mode 1.10 (target ≥ 0.85); …` (the first clause only).
 */
export function ratioLines(output: string): RatioLine[] {
  const found: RatioLine[] = [];
  let section = '';
  for (const raw of output.split('\n')) {
    const line = raw.trim();
    if (/^[A-Za-z]/.test(raw) && !/\d/.test(raw) && raw.length < 60) section = line.replace(/:$/, '');
    if (!/^ratio\b/i.test(line) && !/\/plain\b/.test(line)) continue;
    const target = /target\s*≥\s*([\d.]+)/.exec(line)?.[1];
    const clause = line
      .split(';')[0]!
      .replace(/\(target[^)]*\)/g, '')
      .replace(/\b(BELOW TARGET|ok)\b/g, '');
    const colon = clause.indexOf(':');
    const prefix = colon >= 0 ? clause.slice(0, colon).trim() : '';
    const body = colon >= 0 ? clause.slice(colon + 1) : clause;
    for (const part of body.split(/,| and /)) {
      const m = /^(.*?)\s*([\d]+\.[\d]+)\s*×?\s*$/.exec(part.trim());
      if (m === null) continue;
      const label = [prefix, m[1]!.trim()].filter((t) => t !== '').join(': ') || 'ratio';
      found.push({
        label: section && !/\/plain/.test(label) ? `${section}: ${label}` : label,
        value: Number(m[2]),
        ...(target !== undefined ? { target: Number(target) } : {}),
      });
    }
  }
  return found;
}

/** The first number after `label` (a `×` ratio, a count …) in a line containing it. */
export function numberAfter(output: string, label: RegExp): number | undefined {
  for (const line of output.split('\n')) {
    const m = label.exec(line);
    if (m === null) continue;
    const n = /([\d,]+(?:\.\d+)?)/.exec(line.slice(m.index + m[0].length));
    if (n !== null) return num(n[1]!);
  }
  return undefined;
}
