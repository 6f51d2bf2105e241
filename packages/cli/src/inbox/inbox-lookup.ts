// The port the replay engine reads the inbox through: what state each message id is in for a consumer.
// PostgresInboxLookup implements it on the inbox table; tests use an in-memory map.

/** The states of an inbox row (DESIGN §3). */
export type InboxRowStatus = 'processing' | 'completed' | 'failed' | 'dead_lettered';

/** What the CLI needs to know about one inbox row. */
export interface InboxRowState {
  readonly status: InboxRowStatus;
  readonly attempts: number;
  /** Set for `dead_lettered` rows. */
  readonly deadLetterReason?: string | undefined;
  /** Lease end of a `processing` row (leased mode). */
  readonly lockedUntil?: Date | undefined;
  /** No retry before this time (`failed` rows). */
  readonly availableAt?: Date | undefined;
  /** How often the row was reopened by a replay. */
  readonly replayCount?: number | undefined;
}

/** Reads inbox rows by (consumer, message id). */
export interface InboxLookup {
  /** The rows of `ids` for `consumer`; ids without a row are absent from the map. */
  find(consumer: string, ids: readonly string[]): Promise<ReadonlyMap<string, InboxRowState>>;
}
