// The inbox store port. PostgresInboxStore (Kysely over pg or PGlite) and InMemoryInboxStore implement it;
// both pass the store conformance suite in @inboxkit/testing.
//
// NOTE: the method set below is owned by the core implementation; it is refined there.

/** An inbox store whose handler transactions have type `Tx`. */
export interface InboxStore<Tx = unknown> {
  /** Human-readable kind, for logs (`postgres`, `pglite`, `memory`). */
  readonly kind: string;
  /** Phantom marker of the transaction type; never read at run time. */
  readonly __tx?: Tx;
}
