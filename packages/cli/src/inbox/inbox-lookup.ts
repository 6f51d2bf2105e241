// The port the replay engine reads the inbox through: the rows of some message ids of a consumer, as core's
// inspection API returns them. `inspectorInboxLookup` adapts any core store; tests use an in-memory map.

import type { InboxRow, InboxStatus } from '@inboxkit/core';

/** The states of an inbox row (DESIGN §3), as core names them. */
export type InboxRowStatus = InboxStatus;

/** Reads inbox rows by (consumer, message id). */
export interface InboxLookup {
  /** The rows of `ids` for `consumer`; ids without a row are absent from the map. */
  find(consumer: string, ids: readonly string[]): Promise<ReadonlyMap<string, InboxRow>>;
  /**
   * The outcome of the last replay audit line of each id (`replayed:dead-letter:max-attempts`, …); ids never
   * replayed are absent. Optional: without it, parking sees only what the rows say.
   */
  lastReplayOutcomes?(consumer: string, ids: readonly string[]): Promise<ReadonlyMap<string, string>>;
}
