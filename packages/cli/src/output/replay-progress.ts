// Progress of a running replay: a redrawn bar on a terminal, one plain line per message otherwise (logs,
// CI). Written to stderr so `--json` output on stdout stays machine-readable.

import type { OutputStream } from '../cli-io.js';
import type { Clock } from '../replay/clock.js';
import type { ReplayEntryResult } from '../replay/replay-dead-letters.js';
import { displayName, displayText } from './display-text.js';

/** Receives one result per selected dead letter and draws progress. */
export class ReplayProgress {
  readonly #out: OutputStream;
  readonly #clock: Clock;
  readonly #total: number | undefined;
  readonly #dryRun: boolean;
  readonly #startedAt: number;
  #done = 0;
  #failed = 0;
  #drawn = false;

  /** `total` is the expected number of messages (the `--limit`), when known. */
  constructor(
    out: OutputStream,
    clock: Clock,
    options: { readonly total?: number | undefined; readonly dryRun: boolean },
  ) {
    this.#out = out;
    this.#clock = clock;
    this.#total = options.total;
    this.#dryRun = options.dryRun;
    this.#startedAt = clock.now();
  }

  /** Records one message. */
  readonly onEntry = (result: ReplayEntryResult): void => {
    this.#done += 1;
    if (result.action === 'failed' || result.action === 'unreplayable') this.#failed += 1;
    if (this.#out.isTTY === true) this.#drawBar(result);
    else this.#out.write(`${this.#line(result)}\n`);
  };

  /** Clears the bar before the summary is printed. */
  finish(): void {
    if (this.#drawn) this.#out.write('\r\x1b[2K');
    this.#drawn = false;
  }

  #line(r: ReplayEntryResult): string {
    const name = (value: string | undefined, absent: string): string =>
      value === undefined ? absent : displayName(value);
    const where = r.destination === undefined ? '' : ` -> ${displayName(r.destination)}`;
    const detail = r.detail === undefined ? '' : ` (${displayText(r.detail)})`;
    return `[${r.index}] ${r.action} ${name(r.id, '(no id)')} consumer=${name(r.consumer, '?')} reason=${name(r.reason, '?')} inbox=${r.inboxStatus} expect=${r.prediction}${where}${detail}`;
  }

  #drawBar(last: ReplayEntryResult): void {
    const elapsed = Math.max(1, this.#clock.now() - this.#startedAt) / 1000;
    const rate = (this.#done / elapsed).toFixed(1);
    const verb = this.#dryRun ? 'checked' : 'replayed';
    const stats = `${this.#done}${this.#total === undefined ? '' : `/${this.#total}`} ${verb}, ${this.#failed} failed, ${rate}/s  ${last.id === undefined ? '' : displayName(last.id)}`;
    const width = Math.max(10, Math.min(40, (this.#out.columns ?? 80) - stats.length - 4));
    let bar: string;
    if (this.#total !== undefined) {
      const filled = Math.round((Math.min(this.#done, this.#total) / this.#total) * width);
      bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
    } else {
      const pos = this.#done % width;
      bar = `[${'-'.repeat(pos)}#${'-'.repeat(width - pos - 1)}]`;
    }
    this.#out.write(`\r\x1b[2K${bar} ${stats}`);
    this.#drawn = true;
  }
}
