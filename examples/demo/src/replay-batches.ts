// Replaying "the same batch again": a reader that remembers what a replay run took, and a reader that hands
// exactly those dead letters out again, as if the first run had died after publishing them, before it removed
// them from the DLQ. The replay engine must then apply nothing twice.

import type { DeadLetterEntry, DeadLetterQueueReader, TakenDeadLetter } from '@inboxkit/core';

/** Wraps `reader`; every entry taken through it is copied into `taken`. */
export function recordingReader(
  reader: DeadLetterQueueReader,
  taken: DeadLetterEntry[],
): DeadLetterQueueReader {
  return {
    nonDestructiveBrowse: reader.nonDestructiveBrowse,
    browse: (options) => reader.browse(options),
    async *take(options) {
      for await (const entry of reader.take(options)) {
        // A plain copy, without the functions that settle the original.
        const copy: DeadLetterEntry & Record<string, unknown> = { ...entry };
        delete copy['remove'];
        delete copy['release'];
        taken.push(copy);
        yield entry;
      }
    },
    close: () => reader.close(),
  };
}

/** A DLQ that still holds `entries`: removing and releasing change nothing. */
export function batchReader(entries: readonly DeadLetterEntry[]): DeadLetterQueueReader {
  return {
    nonDestructiveBrowse: true,
    async *browse({ limit }) {
      yield* entries.slice(0, limit);
    },
    async *take({ limit }): AsyncIterable<TakenDeadLetter> {
      for (const entry of entries.slice(0, limit))
        yield { ...entry, remove: async () => {}, release: async () => {} };
    },
    async close() {},
  };
}
