// The intent's own time (the partitioned inbox's day): the consumer's dayOf first, then the CloudEvents `time`
// header in any of its bindings' spellings, and an answer that is not a time refused with what it was.

import { describe, expect, it } from 'vitest';
import { SchemaValidationError } from '../src/errors.js';
import { cloudEventsTime, intentTimeOf } from '../src/intent-time.js';
import type { DecodedMessage } from '../src/message.js';

const decoded = (headers: Record<string, string>, payload: unknown = {}): DecodedMessage<unknown> => ({
  id: 'm1',
  payload,
  headers,
  timestamp: undefined,
  source: { transport: 'memory' },
  replay: undefined,
});

describe('cloudEventsTime', () => {
  it('reads the time of every binary-mode binding, offsets included', () => {
    expect(cloudEventsTime({ ce_time: '2026-12-03T23:59:59Z' })).toEqual(new Date('2026-12-03T23:59:59Z'));
    expect(cloudEventsTime({ 'ce-time': '2026-12-04T01:30:00.250+02:00' })).toEqual(new Date('2026-12-03T23:30:00.250Z'));
    expect(cloudEventsTime({ 'cloudevents:time': '2026-12-03T10:00:00Z' })).toEqual(new Date('2026-12-03T10:00:00Z'));
    expect(cloudEventsTime({ cloudevents_time: ' 2026-12-03t10:00:00z ' })).toEqual(new Date('2026-12-03T10:00:00Z'));
  });

  it('ignores a time that is not an RFC 3339 instant', () => {
    for (const value of ['yesterday', '2026-12-03', '1733270400000', '2026-13-45T99:00:00Z', '']) {
      expect({ value, time: cloudEventsTime({ ce_time: value }) }).toEqual({ value, time: undefined });
    }
    expect(cloudEventsTime({})).toBeUndefined();
  });
});

describe('intentTimeOf', () => {
  const occurredAt = '2026-12-01T08:00:00.000Z';
  const header = { ce_time: '2026-12-03T10:00:00Z' };

  it("takes dayOf's answer before the header, and the header when dayOf answers undefined or is not given", () => {
    const dayOf = (m: DecodedMessage<unknown>) => {
      const at = (m.payload as { occurredAt?: string }).occurredAt;
      return at === undefined ? undefined : new Date(at);
    };
    expect(intentTimeOf(decoded(header, { occurredAt }), dayOf)).toEqual(new Date(occurredAt));
    expect(intentTimeOf(decoded(header, {}), dayOf)).toEqual(new Date('2026-12-03T10:00:00Z'));
    expect(intentTimeOf(decoded(header), undefined)).toEqual(new Date('2026-12-03T10:00:00Z'));
    expect(intentTimeOf(decoded({}), undefined)).toBeUndefined();
  });

  it('refuses a dayOf that throws or answers anything but a valid Date, saying what it answered', () => {
    const cases: [() => unknown, string][] = [
      [() => new Date('soon'), 'got an invalid Date'],
      [() => '2026-12-01', 'got the string "2026-12-01"'],
      [() => 1733040000000, 'got number'],
      [() => null, 'got object'],
      [() => { throw new Error('no occurredAt'); }, 'dayOf threw: no occurredAt'],
    ];
    for (const [dayOf, message] of cases) {
      expect(() => intentTimeOf(decoded(header), dayOf as () => Date)).toThrow(SchemaValidationError);
      expect(() => intentTimeOf(decoded(header), dayOf as () => Date)).toThrow(message);
    }
  });
});
