// What every transport's DeadLetterQueueReader shares, written once: turning a DLQ copy's headers into a
// DeadLetterEntry (the id a replay uses), and a taken dead letter that settles once. A reader keeps only its
// broker's verbs: how to read, how to remove (ack, delete, commit an offset), what releasing leaves to do.

import { HEADERS } from '../dead-letter-record.js';
import type { DeadLetterEntry, TakenDeadLetter } from '../transport.js';

/**
 * The id a dead letter replays under: `x-inboxkit-original-id` (a dead letter of a replayed copy), else
 * `x-inboxkit-message-id`; an empty header counts as none (`undefined`).
 *
 * @example
 * deadLetterId({ 'x-inboxkit-message-id': 'pay-42' }); // 'pay-42'
 */
export function deadLetterId(headers: Readonly<Record<string, string>>): string | undefined {
  const id = headers[HEADERS.originalId] ?? headers[HEADERS.messageId];
  return id === '' ? undefined : id;
}

/**
 * A DLQ copy as a `DeadLetterEntry`: its headers (already decoded to strings), body and position, with the
 * id from `deadLetterId`. `extra` adds the transport's own fields (a record key, a timestamp).
 *
 * @example
 * deadLetterEntry(headers, record.value, `${topic}:${partition}:${offset}`, { key });
 */
export function deadLetterEntry<X extends object = object>(
  headers: Readonly<Record<string, string>>,
  body: DeadLetterEntry['body'],
  position: string,
  extra?: X,
): DeadLetterEntry & X {
  return { ...(extra as X), id: deadLetterId(headers), body, headers, position };
}

/** A broker's verbs for one taken dead letter. */
export interface TakenVerbs {
  /** Removes it from the DLQ; a rejection leaves it unsettled (a later `remove()` tries again). */
  remove(): Promise<void> | void;
  /** What releasing leaves to do (e.g. note it to make visible again). Default is nothing. */
  release?(): Promise<void> | void;
}

/**
 * `entry` taken for replay: `remove()` and `release()` settle it once — after the first that succeeded, both
 * do nothing (a removed entry is never released, a released one never removed).
 *
 * @example
 * yield takenDeadLetter(entry, { remove: () => channel.ack(message) });
 */
export function takenDeadLetter<E extends DeadLetterEntry>(entry: E, verbs: TakenVerbs): E & TakenDeadLetter {
  let settled = false;
  return {
    ...entry,
    async remove() {
      if (settled) return;
      await verbs.remove();
      settled = true;
    },
    async release() {
      if (settled) return;
      settled = true;
      await verbs.release?.();
    },
  };
}
