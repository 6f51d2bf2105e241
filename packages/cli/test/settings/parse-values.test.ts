// Values operators type: durations, times, rates; and secrets never printed.

import { describe, expect, it } from 'vitest';

import {
  describeConnectionSettings,
  resolveConnectionSettings,
} from '../../src/settings/connection-settings.js';
import { maskSecretsIn, maskUrl } from '../../src/settings/mask-url.js';
import { formatDuration, parseDuration, parseRate, parseSince } from '../../src/settings/parse-values.js';

describe('parse values', () => {
  it('reads durations with units and combinations', () => {
    expect(parseDuration('500ms', 'f')).toBe(500);
    expect(parseDuration('30s', 'f')).toBe(30_000);
    expect(parseDuration('1h30m', 'f')).toBe(5_400_000);
    expect(parseDuration('7d', 'f')).toBe(604_800_000);
    expect(parseDuration('250', 'f')).toBe(250);
    expect(() => parseDuration('7 days', '--x')).toThrow(/--x expects a duration/);
    expect(() => parseDuration('5h!', '--x')).toThrow(/--x/);
  });

  it('reads rates per second, minute and hour', () => {
    expect(parseRate('50', 'f')).toBe(50);
    expect(parseRate('50/s', 'f')).toBe(50);
    expect(parseRate('120/m', 'f')).toBe(2);
    expect(parseRate('0.5', 'f')).toBe(0.5);
    expect(() => parseRate('-1', '--rate')).toThrow(/--rate/);
  });

  it('reads --since as a duration ago or an ISO time', () => {
    const now = Date.parse('2030-01-01T12:00:00Z');
    expect(parseSince('2h', now, 'f').toISOString()).toBe('2030-01-01T10:00:00.000Z');
    expect(parseSince('2029-12-31', now, 'f').toISOString()).toBe('2029-12-31T00:00:00.000Z');
  });

  it('formats durations compactly', () => {
    expect(formatDuration(450)).toBe('450ms');
    expect(formatDuration(90_000)).toBe('1m 30s');
    expect(formatDuration(7 * 86_400_000 + 3_600_000)).toBe('7d 1h');
  });
});

describe('secrets', () => {
  it('masks passwords in URLs', () => {
    expect(maskUrl('postgres://app:s3cret@db:5432/app')).toBe('postgres://app:***@db:5432/app');
    expect(maskUrl('amqp://guest:guest@localhost:5672')).toBe('amqp://guest:***@localhost:5672');
    expect(maskUrl('postgres://db/app?password=hunter2')).not.toContain('hunter2');
    expect(maskUrl('http://localhost:9324')).toBe('http://localhost:9324');
  });

  it('masks secrets quoted inside error messages', () => {
    const url = 'postgres://app:s3cret@db:5432/app';
    expect(maskSecretsIn(`connect failed for ${url}`, [url])).not.toContain('s3cret');
    expect(maskSecretsIn('amqp://u:pw@host failed', [])).toBe('amqp://u:***@host failed');
  });

  it('describes settings without passwords', () => {
    const s = resolveConnectionSettings(
      {},
      { DATABASE_URL: 'postgres://app:s3cret@db/app', AMQP_URL: 'amqp://u:pw@r' },
    );
    expect(JSON.stringify(describeConnectionSettings(s))).not.toMatch(/s3cret|:pw@/);
  });
});
