// Read access to a JetStream DLQ stream for `inboxkit dlq list|replay|edit` and the console. A stream keeps its
// messages by sequence, so browsing reads them in place (nothing is received, nothing moves) and a replayed dead
// letter is removed by deleting its sequence once its copy is published back.

import { deadLetterEntry, takenDeadLetter } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader, TakenDeadLetter } from '@inboxkit/core';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

import { readHeaders } from './nats-headers.js';

/** Options of `natsDeadLetterQueue`. */
export interface NatsDeadLetterQueueOptions {
  /** A connection; the reader never closes it. */
  readonly connection: NatsConnection;
  /** The DLQ stream (the one that captures the consumer's `deadLetterSubject`). */
  readonly stream: string;
}

function entryOf(stream: string, m: StoredMsg): DeadLetterEntry {
  const headers = readHeaders(m.header);
  // The DLQ copy's own JetStream headers (its Nats-Msg-Id) are not the message's.
  for (const name of Object.keys(headers)) if (name.startsWith('nats-')) delete headers[name];
  return deadLetterEntry(headers, m.data, `${stream}:${m.seq}`);
}

/**
 * A DeadLetterQueueReader over a JetStream stream. `browse` reads in sequence order without touching anything
 * (`nonDestructiveBrowse: true`); `take` hands out the same entries, and `remove()` deletes one from the
 * stream (`release()` leaves it where it is).
 *
 * @example
 * const dlq = natsDeadLetterQueue({ connection: nc, stream: 'ORDERS_DLQ' });
 * for await (const entry of dlq.browse({ limit: 20 })) console.log(entry.id, entry.headers['x-inboxkit-reason']);
 */
export function natsDeadLetterQueue(options: NatsDeadLetterQueueOptions): DeadLetterQueueReader {
  let manager: Promise<JetStreamManager> | undefined;
  const jsm = () => (manager ??= jetstreamManager(options.connection));

  async function* read(limit: number): AsyncGenerator<StoredMsg> {
    const m = await jsm();
    const info = await m.streams.info(options.stream);
    let seq = info.state.first_seq;
    const last = info.state.last_seq;
    for (let found = 0; found < limit && seq <= last && info.state.messages > 0; seq++) {
      const stored = await m.streams.getMessage(options.stream, { seq });
      if (stored === null) continue; // deleted (replayed) or expired
      found++;
      yield stored;
    }
  }

  return Object.freeze({
    nonDestructiveBrowse: true,
    async *browse({ limit }: { readonly limit: number }): AsyncIterable<DeadLetterEntry> {
      for await (const stored of read(limit)) yield entryOf(options.stream, stored);
    },
    async *take({ limit }: { readonly limit: number }): AsyncIterable<TakenDeadLetter> {
      const m = await jsm();
      for await (const stored of read(limit)) {
        // release(): a stream keeps the message in place, nothing to do.
        yield takenDeadLetter(entryOf(options.stream, stored), {
          remove: async () => void (await m.streams.deleteMessage(options.stream, stored.seq, false)),
        });
      }
    },
    async close(): Promise<void> {
      // The connection belongs to the caller.
    },
  });
}
