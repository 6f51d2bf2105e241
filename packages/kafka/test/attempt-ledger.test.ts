// The attempt ledger decides which records get a "started attempt" recorded: after a join, the records the
// previous holder may have had in flight, each once per assignment; in steady state none.
import { describe, expect, it } from 'vitest';

import { AttemptLedger } from '../src/attempt-ledger.js';

const T = 'orders';

describe('AttemptLedger', () => {
  it('is careful after a join until one record ran that had not finished before', () => {
    const ledger = new AttemptLedger();
    expect(ledger.isCareful(T, 0)).toBe(true);
    ledger.suspectRan(T, 0);
    expect(ledger.isCareful(T, 0)).toBe(false);
    expect(ledger.isCareful(T, 1)).toBe(true);
    expect(ledger.isCareful('other', 0)).toBe(true);
    ledger.reset();
    expect(ledger.isCareful(T, 0)).toBe(true);
  });

  it('stays careful for as many records as a partition can have in flight (keyConcurrency)', () => {
    const ledger = new AttemptLedger(3);
    ledger.suspectRan(T, 0);
    ledger.suspectRan(T, 0);
    expect(ledger.isCareful(T, 0)).toBe(true);
    ledger.suspectRan(T, 0);
    expect(ledger.isCareful(T, 0)).toBe(false);
    ledger.suspectRan(T, 0);
    expect(ledger.isCareful(T, 0)).toBe(false);
  });

  it('charges an offset once per assignment, also when a retry or an outage brings the partition back to it', () => {
    const ledger = new AttemptLedger();
    expect(ledger.needsCharge(T, 0, '10')).toBe(true);
    ledger.charged(T, 0, '10');
    expect(ledger.needsCharge(T, 0, '10')).toBe(false);
    expect(ledger.needsCharge(T, 0, '9')).toBe(false);
    expect(ledger.needsCharge(T, 0, '11')).toBe(true);
    expect(ledger.needsCharge(T, 1, '10')).toBe(true);
    ledger.reset();
    expect(ledger.needsCharge(T, 0, '10')).toBe(true);
  });

  it('restarts batch chunks small after a join and doubles them up to batchSize', () => {
    const ledger = new AttemptLedger();
    const limits: number[] = [];
    for (let k = 0; k < 6; k++) {
      limits.push(ledger.chunkLimit(T, 0, 20));
      ledger.chunkRan(T, 0, 20);
    }
    expect(limits).toEqual([2, 4, 8, 16, 20, 20]);
    expect(ledger.chunkLimit(T, 1, 20)).toBe(2);
    ledger.reset();
    expect(ledger.chunkLimit(T, 0, 20)).toBe(2);
    expect(ledger.chunkLimit(T, 0, 1)).toBe(1);
  });
});
