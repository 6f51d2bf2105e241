// Parsers of the values operators type: durations (`7d`, `90s`), points in time (`2h` ago or ISO 8601),
// rates (`50`, `50/s`, `600/m`) and positive integers. Each throws a UsageError naming the flag.

import { UsageError } from '../usage-error.js';
import { rateProblem } from '../replay/rate-limiter.js';

const UNITS_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * A duration in milliseconds from `500ms`, `30s`, `15m`, `6h`, `7d`, `2w`, combinations such as `1h30m`, or a
 * bare number of milliseconds.
 *
 * @example
 * parseDuration('1h30m', '--since') // 5_400_000
 */
export function parseDuration(value: string, flag: string, command?: string): number {
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let consumed = 0;
  for (let match = part.exec(text); match !== null; match = part.exec(text)) {
    total += Number(match[1]) * UNITS_MS[match[2]!]!;
    consumed = part.lastIndex;
  }
  if (consumed === 0 || consumed !== text.length) {
    throw new UsageError(
      `${flag} expects a duration such as 30s, 15m, 6h or 7d, got ${JSON.stringify(value)}`,
      command,
    );
  }
  return total;
}

/**
 * A point in time: an ISO 8601 date or date-time (`2030-01-31`, `2030-01-31T12:00:00Z`) or a duration ago
 * (`2h` = two hours before `now`).
 */
export function parseSince(value: string, now: number, flag: string, command?: string): Date {
  if (/^\d{4}-\d{2}-\d{2}/.test(value.trim())) {
    const date = new Date(value);
    if (Number.isNaN(date.getTime())) {
      throw new UsageError(
        `${flag} expects an ISO 8601 time (2030-01-31T12:00:00Z) or a duration ago (6h), got ${JSON.stringify(value)}`,
        command,
      );
    }
    return date;
  }
  try {
    return new Date(now - parseDuration(value, flag, command));
  } catch {
    throw new UsageError(
      `${flag} expects an ISO 8601 time (2030-01-31T12:00:00Z) or a duration ago (6h), got ${JSON.stringify(value)}`,
      command,
    );
  }
}

/** Messages per second from `50`, `50/s`, `600/m` or `3600/h`. */
export function parseRate(value: string, flag: string, command?: string): number {
  const match = /^(\d+(?:\.\d+)?)(?:\/(s|m|h))?$/.exec(value.trim());
  const per = { s: 1, m: 60, h: 3600 } as const;
  const rate = match ? Number(match[1]) / per[(match[2] ?? 's') as keyof typeof per] : Number.NaN;
  if (!(rate > 0) || !Number.isFinite(rate)) {
    throw new UsageError(
      `${flag} expects messages per second such as 50, 50/s or 600/m, got ${JSON.stringify(value)}`,
      command,
    );
  }
  // A timer cannot wait longer than 2^31-1 ms: a slower rate would fire at once, i.e. be no limit at all.
  const problem = rateProblem(rate, `${flag} ${value.trim()}`);
  if (problem !== undefined) throw new UsageError(`${problem.replace(/ per second$/, '/s')}`, command);
  return rate;
}

/** A positive integer. */
export function parsePositiveInt(value: string, flag: string, command?: string): number {
  const n = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new UsageError(`${flag} expects a positive whole number, got ${JSON.stringify(value)}`, command);
  }
  return n;
}

/** `1h 30m`-style rendering of a duration, for output. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(Math.round(ms));
  if (rest < 1_000) return `${sign}${rest}ms`;
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
    if (parts.length === 2) break;
  }
  return sign + parts.join(' ');
}
