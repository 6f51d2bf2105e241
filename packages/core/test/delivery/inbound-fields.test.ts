// The broker fields the transports read into an InboundMessage: an empty id is no id, a count is a positive
// integer or absent, a producer's time stamp epoch ms a Date can hold or absent.

import { describe, expect, it } from 'vitest';
import { nonEmptyText, positiveIntegerText, producerTimestampMs } from '../../src/index.js';

describe('inbound fields', () => {
  it('reads an id only from a non-empty string', () => {
    expect(nonEmptyText('order-1')).toBe('order-1');
    for (const absent of ['', undefined, null, 42, Buffer.from('x')])
      expect(nonEmptyText(absent)).toBeUndefined();
  });

  it('reads a positive integer from text, anything else as absent', () => {
    expect(positiveIntegerText('3')).toBe(3);
    expect(positiveIntegerText('1700000000000')).toBe(1_700_000_000_000);
    for (const absent of [undefined, '', '0', '-2', '1.5', 'x'])
      expect(positiveIntegerText(absent)).toBeUndefined();
  });

  it("reads a producer's time stamp as epoch ms a Date can hold, anything else as absent", () => {
    expect(producerTimestampMs('1700000000000')).toBe(1_700_000_000_000);
    expect(producerTimestampMs('8640000000000000')).toBe(8.64e15);
    for (const absent of [
      undefined,
      '',
      '0',
      '-1',
      '1.7e12',
      ' 1700000000000',
      '8640000000000001',
      '99999999999999999',
    ])
      expect(producerTimestampMs(absent)).toBeUndefined();
  });
});
