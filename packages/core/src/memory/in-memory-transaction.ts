// The transaction an InMemoryInboxStore hands to handlers: staged effects become visible only if the inbox
// record commits, so unit tests can count effects the way they would count rows.

/** One committed effect. */
export interface InMemoryEffect {
  readonly consumer: string;
  readonly messageId: string;
  readonly effect: unknown;
}

/** Where a transaction's staged work goes on commit. Internal to the in-memory store. */
export interface TransactionSink {
  readonly consumer: string;
  readonly messageId: string;
  readonly effects: unknown[];
  readonly onCommit: (() => void)[];
  closed: boolean;
}

/**
 * A handler's transaction on the in-memory store.
 *
 * @example
 * handler: async (message, { tx }) => {
 *   tx.stage({ charged: message.payload.amount });
 * }
 * // later: store.effects.length === number of messages applied
 */
export class InMemoryTransaction {
  readonly #sink: () => TransactionSink;

  /** @internal Created by InMemoryInboxStore. */
  constructor(sink: () => TransactionSink) {
    this.#sink = sink;
  }

  /** Stages `effect`; it is appended to `store.effects` when (and only if) this transaction commits. */
  stage(effect: unknown): void {
    this.#open().effects.push(effect);
  }

  /** Runs `fn` after this transaction commits (for example to update a test's own state). */
  onCommit(fn: () => void): void {
    this.#open().onCommit.push(fn);
  }

  /** The message this transaction belongs to. */
  get messageId(): string {
    return this.#sink().messageId;
  }

  #open(): TransactionSink {
    const sink = this.#sink();
    if (sink.closed) throw new Error('inboxkit: the handler transaction has ended; use context.tx only while the handler runs');
    return sink;
  }
}
