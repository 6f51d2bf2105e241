// The broker side of `discard`: after the inbox rows are discarded (audited), their copies in the broker's DLQ
// are removed through the transport's DLQ reader. The inbox decides, one entry at a time: a copy whose row is
// `discarded` is removed; a copy of a dead letter the inbox holds no live row for (a payload mismatch, whose
// row is the first payload's completed one; a late message; one that could not be recorded) is audited as a
// broker-only discard and removed; every other copy is released untouched. Rerunning after a crash between
// the inbox and the broker removes what is left, and audits nothing twice for the inbox's rows.

import { parseDeadLetterHeaders } from '@inboxkit/core';
import type { DeadLetterQueueReader, InboxInspector, InboxStore } from '@inboxkit/core';

import { matchesFilter } from './dead-letter-filter.js';
import type { DeadLetterFilter } from './dead-letter-filter.js';
import { recordedConsumer } from './recorded-consumer.js';

/** Options of `discardFromDlq`. */
export interface DiscardFromDlqOptions {
  /** The DLQ. Not closed here. */
  readonly reader: DeadLetterQueueReader;
  /** The inbox the decision is read from, and where a broker-only discard is audited. */
  readonly store: Pick<InboxInspector, 'findRows'> & Pick<InboxStore<unknown>, 'recordReplay'>;
  /** Which copies: `consumer` is required (it names copies without inboxkit headers too). */
  readonly filter: DeadLetterFilter & { readonly consumer: string };
  /** Only copies dead-lettered before this time. Default: no bound. */
  readonly until?: Date | undefined;
  readonly actionId: string;
  readonly requestedBy: string;
  /** Why, for the audit of broker-only discards. */
  readonly reason: string;
}

/** What `discardFromDlq` did with the copies it saw. */
export interface DiscardFromDlqResult {
  /** Ids whose copy was removed because their inbox row is discarded. */
  readonly removed: readonly string[];
  /** Ids whose copy was removed as broker-only dead letters (audited now). */
  readonly removedBrokerOnly: readonly string[];
  /** Copies left in the DLQ: outside the selection, or their row is not discarded (still live, archived …). */
  readonly released: number;
}

/**
 * Removes the DLQ copies of discarded dead letters (see the module comment for the decision).
 *
 * @example
 * await discardFromDlq({ reader, store, filter: { consumer: 'billing', ids: ['o-1'] }, actionId, requestedBy: 'ana', reason: 'test data' });
 */
export async function discardFromDlq(options: DiscardFromDlqOptions): Promise<DiscardFromDlqResult> {
  const removed: string[] = [];
  const removedBrokerOnly: string[] = [];
  let released = 0;
  const seen = new Set<string>();
  for await (const entry of options.reader.take({ limit: Number.MAX_SAFE_INTEGER })) {
    if (seen.has(entry.position)) {
      // A queue that hands back what this run released: the DLQ has been seen whole.
      await entry.release();
      break;
    }
    seen.add(entry.position);
    const record = parseDeadLetterHeaders(entry.headers);
    const id = entry.id;
    const consumer = recordedConsumer(record) ?? options.filter.consumer;
    const selected =
      id !== undefined &&
      consumer === options.filter.consumer &&
      matchesFilter(id, record, options.filter) &&
      (options.until === undefined || (record !== undefined && record.deadLetteredAt.getTime() < options.until.getTime()));
    if (!selected) {
      await entry.release();
      released++;
      continue;
    }
    const [row] = await options.store.findRows(consumer, [id]);
    if (row?.status === 'discarded') {
      await entry.remove();
      removed.push(id);
    } else if (row === undefined || row.status === 'completed') {
      await options.store.recordReplay({
        replayId: options.actionId,
        consumer,
        messageId: id,
        requestedBy: options.requestedBy,
        requestedAt: new Date(),
        outcome: `discarded dlq-only/${record?.reason ?? 'none'}: ${options.reason}`,
      });
      await entry.remove();
      removedBrokerOnly.push(id);
    } else {
      await entry.release();
      released++;
    }
  }
  return { removed, removedBrokerOnly, released };
}
