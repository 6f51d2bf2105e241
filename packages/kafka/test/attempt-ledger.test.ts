// The attempt ledger decides which records get a "started attempt" recorded: a record must be counted once
// per real attempt, never for a fetch that did not run it.
import { describe, expect, it } from 'vitest';

import { AttemptLedger } from '../src/attempt-ledger.js';

const T = 'orders';

function offsets(from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => String(from + i));
}

describe('AttemptLedger', () => {
  it('is careful in the first batch of a partition after a join, until settled', () => {
    const ledger = new AttemptLedger();
    expect(ledger.isCareful(T, 0)).toBe(true);
    ledger.settle(T, 0);
    expect(ledger.isCareful(T, 0)).toBe(false);
    expect(ledger.isCareful(T, 1)).toBe(true);
    ledger.reset();
    expect(ledger.isCareful(T, 0)).toBe(true);
  });

  it('counts every record of a fresh batch', () => {
    const ledger = new AttemptLedger();
    expect(ledger.uncounted(T, 0, offsets(10, 14))).toEqual(offsets(10, 14));
  });

  it('does not count again the records behind a retried one when the partition is fetched again', () => {
    const ledger = new AttemptLedger();
    ledger.counted(T, 0, '10', '19');
    ledger.ran(T, 0, '10');
    ledger.ran(T, 0, '11'); // 11 is retried: seek back to 11
    // The refetch starts at 11: 11 ran, so it is counted again; 12..19 were counted and never ran.
    expect(ledger.uncounted(T, 0, offsets(11, 25))).toEqual(['11', ...offsets(20, 25)]);
    ledger.counted(T, 0, '11', '25');
    ledger.ran(T, 0, '11');
    ledger.ran(T, 0, '12');
    expect(ledger.uncounted(T, 0, offsets(12, 30))).toEqual(['12', ...offsets(26, 30)]);
  });

  it('forgets a range once every record in it ran', () => {
    const ledger = new AttemptLedger();
    ledger.counted(T, 0, '0', '4');
    for (const o of offsets(0, 4)) ledger.ran(T, 0, o);
    expect(ledger.uncounted(T, 0, offsets(0, 9))).toEqual(offsets(0, 9));
  });

  it('keeps partitions apart and forgets everything on reset', () => {
    const ledger = new AttemptLedger();
    ledger.counted(T, 0, '0', '9');
    expect(ledger.uncounted(T, 1, offsets(0, 2))).toEqual(offsets(0, 2));
    expect(ledger.uncounted('other', 0, offsets(0, 2))).toEqual(offsets(0, 2));
    expect(ledger.uncounted(T, 0, offsets(0, 2))).toEqual([]);
    ledger.reset();
    expect(ledger.uncounted(T, 0, offsets(0, 2))).toEqual(offsets(0, 2));
  });

  it('replaces a range the next fetch does not touch', () => {
    const ledger = new AttemptLedger();
    ledger.counted(T, 0, '0', '9');
    ledger.counted(T, 0, '100', '109');
    expect(ledger.uncounted(T, 0, offsets(5, 9))).toEqual(offsets(5, 9));
    expect(ledger.uncounted(T, 0, offsets(100, 101))).toEqual([]);
  });
});
