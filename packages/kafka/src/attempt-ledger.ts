// Which fetched records still need a "started attempt" recorded in the inbox before they run.
//
// Kafka keeps no delivery count, so the transport tells core durably, once per fetched batch, that an attempt
// of each record is starting (core then dead-letters a record that kills the process on every attempt). A
// record counted but never run would lose an attempt it never had, so this ledger keeps two facts per
// partition:
//   - the range of offsets counted but not yet run (left over when a retry or a stop ends a batch early and
//     the partition is fetched again): they are not counted a second time;
//   - whether the partition is in its first batch since the group was joined. After a crash nobody knows
//     how far the last process got, so the first batch counts one record at a time, just before it runs,
//     until a record is found that was not already finished: the crash-looping record, if any, is counted,
//     and the ones behind it are not. (A crash can thus cost the records behind the crashing one in the same
//     batch one attempt, once, never once per crash.)

/** Offsets of one partition with an attempt recorded that has not run yet: [from, to]. */
interface PendingRange {
  from: bigint;
  to: bigint;
}

function key(topic: string, partition: number): string {
  return `${partition}\u0000${topic}`;
}

/** Per-partition attempt bookkeeping of one consumer instance; reset whenever the group is (re)joined. */
export class AttemptLedger {
  readonly #pending = new Map<string, PendingRange>();
  readonly #settled = new Set<string>();

  /** The assignment may have changed: forget everything (another member may have run these records). */
  reset(): void {
    this.#pending.clear();
    this.#settled.clear();
  }

  /** True while the partition's records must be counted one at a time (its first batch since a join). */
  isCareful(topic: string, partition: number): boolean {
    return !this.#settled.has(key(topic, partition));
  }

  /** A record of the partition ran that had not finished before: later records may be counted per batch. */
  settle(topic: string, partition: number): void {
    this.#settled.add(key(topic, partition));
  }

  /** Of `offsets` (ascending, records about to run), those whose attempt is not counted yet. */
  uncounted(topic: string, partition: number, offsets: readonly string[]): string[] {
    const range = this.#pending.get(key(topic, partition));
    if (range === undefined) return [...offsets];
    return offsets.filter((o) => {
      const n = BigInt(o);
      return n < range.from || n > range.to;
    });
  }

  /**
   * The attempts of the records `first`..`last` of a fetched batch are now counted (fetched batches are
   * contiguous, give or take compaction gaps). Then call `ran()` for each record that runs.
   */
  counted(topic: string, partition: number, first: string, last: string): void {
    const k = key(topic, partition);
    const range = this.#pending.get(k);
    const from = BigInt(first);
    const to = BigInt(last);
    // The batch starts at the next record to run: whatever lay before it is gone from this partition's view.
    if (range !== undefined && from <= range.to + 1n && to >= range.from - 1n) {
      range.from = from;
      if (to > range.to) range.to = to;
    } else {
      this.#pending.set(k, { from, to });
    }
  }

  /** The record at `offset` ran (its counted attempt is used up). Records run in offset order. */
  ran(topic: string, partition: number, offset: string): void {
    const k = key(topic, partition);
    const range = this.#pending.get(k);
    if (range === undefined) return;
    const n = BigInt(offset);
    if (n < range.from) return;
    if (n >= range.to) this.#pending.delete(k);
    else range.from = n + 1n;
  }
}
