// The broker fields the transports read into an InboundMessage: an empty id is no id, a count is a positive
// integer or absent.

import { describe, expect, it } from 'vitest';
import { nonEmptyText, positiveIntegerText } from '../../src/index.js';

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
});
