// Which records get a "started attempt" recorded in the inbox before they run, partition by partition.
//
// Kafka keeps no delivery count, and a record that kills its process leaves no trace in the inbox (its
// transaction dies with it). Yet such a record must reach the DLQ. Pre-counting every fetched record would
// charge each crash to records that never ran, so the rule is: charge only the records that can have been
// running when the previous holder of the partition died, and only once per assignment.
//
// After a (re)join nobody knows how far the previous holder got. The records it had in flight are the first
// unfinished ones after the committed offset: at most `suspects` of them (its key concurrency in message mode,
// one per chunk in batch mode). So the partition starts *careful*: records run one at a time, each charged
// just before it runs, until `suspects` of them ran that had not finished before (a duplicate is not one).
// A charge is then the attempt about to run (the claim counts `max(attempts + 1, started)`), so it costs a
// healthy record nothing; a record that dies here again is charged again on the next resume, and after
// `maxAttempts` charges its claim dead-letters it. After the careful records, nothing is charged: a crash in
// steady state is counted on the next resume, on the record that was running.
//
// Within one assignment the process saw everything itself: an offset is charged at most once, even when a
// retry or an outage sends the partition back to it.
//
// Batch mode restarts small: after the careful record the chunks grow 2, 4, 8 … up to batchSize, so that a
// record that kills its process inside a chunk is the careful one after a few resumes (its chunk halves each
// time) instead of after as many resumes as records precede it in the chunk.

/** What one partition's records need, within the current assignment. */
interface PartitionState {
  /** Careful records still to find (records that run and had not finished before). */
  suspects: number;
  /** Every offset up to this one was charged (or needed no charge) in this assignment. */
  chargedThrough: bigint;
  /** Batch mode: the largest chunk allowed next. */
  chunkLimit: number;
}

function key(topic: string, partition: number): string {
  return `${partition}\u0000${topic}`;
}

/** Per-partition attempt bookkeeping of one consumer instance; reset whenever the group is (re)joined. */
export class AttemptLedger {
  readonly #suspects: number;
  readonly #partitions = new Map<string, PartitionState>();

  /** `suspects`: the most records one partition can have in flight (keyConcurrency; 1 in batch mode). */
  constructor(suspects = 1) {
    this.#suspects = suspects;
  }

  /** The assignment may have changed: every partition starts careful again. */
  reset(): void {
    this.#partitions.clear();
  }

  #state(topic: string, partition: number): PartitionState {
    const k = key(topic, partition);
    let state = this.#partitions.get(k);
    if (state === undefined) {
      state = { suspects: this.#suspects, chargedThrough: -1n, chunkLimit: 2 };
      this.#partitions.set(k, state);
    }
    return state;
  }

  /** True while the partition's records must run one at a time, each charged first. */
  isCareful(topic: string, partition: number): boolean {
    return this.#state(topic, partition).suspects > 0;
  }

  /** Whether the careful record at `offset` still needs its charge (not charged in this assignment yet). */
  needsCharge(topic: string, partition: number, offset: string): boolean {
    return BigInt(offset) > this.#state(topic, partition).chargedThrough;
  }

  /** The record at `offset` was charged (or needs none): it is never charged again in this assignment. */
  charged(topic: string, partition: number, offset: string): void {
    const state = this.#state(topic, partition);
    const n = BigInt(offset);
    if (n > state.chargedThrough) state.chargedThrough = n;
  }

  /** A careful record ran that had not finished before: one suspect fewer. */
  suspectRan(topic: string, partition: number): void {
    const state = this.#state(topic, partition);
    if (state.suspects > 0) state.suspects -= 1;
  }

  /** Batch mode: the most records the next chunk may hold. */
  chunkLimit(topic: string, partition: number, batchSize: number): number {
    return Math.min(batchSize, this.#state(topic, partition).chunkLimit);
  }

  /** Batch mode: a chunk committed; the next may be twice as large. */
  chunkRan(topic: string, partition: number, batchSize: number): void {
    const state = this.#state(topic, partition);
    state.chunkLimit = Math.min(batchSize, state.chunkLimit * 2);
  }
}
