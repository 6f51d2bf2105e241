// Progress while a replay runs: a redrawn bar on a terminal, one plain line per message in logs.

import { describe, expect, it } from 'vitest';

import { ReplayProgress } from '../../src/output/replay-progress.js';
import type { ReplayEntryResult } from '../../src/replay/replay-dead-letters.js';
import { FakeClock } from '../support/memory-ports.js';

const result = (index: number, action: ReplayEntryResult['action'] = 'replayed'): ReplayEntryResult => ({
  index,
  position: `dlq:${index}`,
  id: `m-${index}`,
  consumer: 'orders',
  reason: 'max-attempts',
  destination: 'orders',
  inboxStatus: 'dead_lettered',
  prediction: 'reopen',
  action,
  detail: action === 'failed' ? 'publish failed: nack' : undefined,
});

function capture(isTTY: boolean): {
  out: { write(s: string): void; isTTY: boolean; columns: number };
  text: () => string;
} {
  let text = '';
  return { out: { write: (s: string) => void (text += s), isTTY, columns: 100 }, text: () => text };
}

describe('ReplayProgress', () => {
  it('draws a bar on a terminal, redrawn in place, and clears it at the end', () => {
    const { out, text } = capture(true);
    const clock = new FakeClock();
    const progress = new ReplayProgress(out, clock, { total: 4, dryRun: false });
    progress.onEntry(result(1));
    void clock.sleep(1_000);
    progress.onEntry(result(2, 'failed'));
    expect(text()).not.toContain('\n');
    expect(text().split('\r\x1b[2K').at(-1)).toMatch(/^\[#+-+\] 2\/4 replayed, 1 failed, 2\.0\/s {2}m-2$/);
    progress.finish();
    expect(text().endsWith('\r\x1b[2K')).toBe(true);
  });

  it('writes one plain line per message when not on a terminal', () => {
    const { out, text } = capture(false);
    const progress = new ReplayProgress(out, new FakeClock(), { total: undefined, dryRun: false });
    progress.onEntry(result(1));
    progress.onEntry(result(2, 'failed'));
    progress.finish();
    expect(text().split('\n').filter(Boolean)).toEqual([
      '[1] replayed m-1 consumer=orders reason=max-attempts inbox=dead_lettered expect=reopen -> orders',
      '[2] failed m-2 consumer=orders reason=max-attempts inbox=dead_lettered expect=reopen -> orders (publish failed: nack)',
    ]);
  });
});
