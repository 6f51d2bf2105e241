// What sits in a DLQ, for `inboxkit dlq list`: entries grouped by consumer, reason and error shape, each
// annotated with the inbox status of its message id, so an operator sees what a replay would do before
// running one.

import { parseDeadLetterHeaders } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader, FingerprintInput, FingerprintResolver } from '@inboxkit/core';
import type { InboxLookup, InboxRowStatus } from '../inbox/inbox-lookup.js';
import { matchesFilter } from './dead-letter-filter.js';
import { isParked } from './parked.js';
import type { DeadLetterFilter } from './dead-letter-filter.js';
import { predictReplay } from './predict-replay.js';
import { recordedConsumer } from './recorded-consumer.js';
import { replayFingerprint } from './replay-fingerprint.js';
import type { ReplayPrediction } from './predict-replay.js';

/** Options of `listDeadLetters()`. */
export interface ListDeadLettersOptions {
  /** The DLQ to read. Only `browse` is called; not closed by this function. */
  readonly reader: DeadLetterQueueReader;
  /** Reads the inbox status of each id. Without it every status is `unknown`. */
  readonly inbox?: InboxLookup | undefined;
  /** Which entries to show. `consumer` also names the consumer of entries without inboxkit headers. */
  readonly filter?: DeadLetterFilter | undefined;
  /** Read at most this many entries. Default is 1,000. */
  readonly limit?: number | undefined;
  /**
   * The consumers' `fingerprint` options by consumer name (a `--schemas` module's `fingerprints`): a
   * `payload-mismatch` copy is fingerprinted as its consumer does, so the prediction is `apply` when only a
   * field the consumer leaves out differs. Default is none: the whole payload is fingerprinted.
   *
   * @example
   * listDeadLetters({ reader, inbox, fingerprints: { orders: { exclude: ['sentAt'] } } });
   */
  readonly fingerprints?: Readonly<Record<string, FingerprintResolver<FingerprintInput>>> | undefined;
  /**
   * Called with every entry the filter selects and the listing keeps, as read (headers and body included): the
   * console keeps a bounded copy of each to show one message's record without reading the DLQ again. Default
   * is none.
   */
  readonly onSelected?: ((entry: DeadLetterEntry, listed: ListedDeadLetter) => void) | undefined;
  /**
   * A further condition on a selected entry, as listed (before its inbox status is read): the console's
   * search and `until`. Default is none.
   */
  readonly where?: ((entry: ListedDeadLetter) => boolean) | undefined;
  /** Selected entries to pass over before keeping any (paging: the entries of earlier pages). Default is 0. */
  readonly skip?: number | undefined;
  /**
   * Keep at most this many selected entries; once one more is selected, stop reading and report `more`. Only
   * what is kept is held in memory, however long the DLQ. Default is no bound (every selected entry of the
   * `limit` read).
   */
  readonly keep?: number | undefined;
}

/** One dead letter as listed. */
export interface ListedDeadLetter {
  readonly position: string;
  readonly id: string | undefined;
  readonly consumer: string | undefined;
  readonly reason: string | undefined;
  /** `Name: message` of the last error, when recorded. */
  readonly error: string | undefined;
  readonly attempts: number | undefined;
  readonly deadLetteredAt: Date | undefined;
  /** The recorded source (topic, queue, exchange/routing key). */
  readonly source: string | undefined;
  readonly inboxStatus: InboxRowStatus | 'none' | 'unknown';
  readonly prediction: ReplayPrediction;
  /** A replay of it failed before: bulk replays leave it in the DLQ unless asked (see `isParked`). */
  readonly parked: boolean;
}

/** Entries sharing consumer, reason and error shape. */
export interface DeadLetterGroup {
  readonly consumer: string | undefined;
  readonly reason: string | undefined;
  /** The error with numbers and ids replaced by placeholders, so similar failures group together. */
  readonly errorShape: string | undefined;
  /** One real error message of the group. */
  readonly sampleError: string | undefined;
  readonly count: number;
  readonly oldest: Date | undefined;
  readonly newest: Date | undefined;
  /** Counts by inbox status of the group's ids. */
  readonly inboxStatuses: Readonly<Partial<Record<InboxRowStatus | 'none' | 'unknown', number>>>;
  /** Up to 5 message ids of the group. */
  readonly sampleIds: readonly string[];
}

/** The result of `listDeadLetters()`. */
export interface DeadLetterListing {
  /** False when reading receives and releases (SQS, RabbitMQ): receive counts rise and order may change. */
  readonly nonDestructiveBrowse: boolean;
  /** Entries read (selected or not). */
  readonly read: number;
  /** True when `limit` entries were read: the DLQ may hold more. */
  readonly truncated: boolean;
  /** Selected entries passed over (`skip`). */
  readonly skipped: number;
  /** True when a selected entry beyond `keep` was found: another page exists. */
  readonly more: boolean;
  readonly groups: readonly DeadLetterGroup[];
  readonly entries: readonly ListedDeadLetter[];
}

/** Stands for the replay id of a future run: never equal to a row's last replay id. */
const NEXT_REPLAY = '\u0000next-replay';

/** Replaces the variable parts of an error message (numbers, UUIDs, hex ids, quoted values) with placeholders. */
export function errorShape(error: string): string {
  return error
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>')
    .replace(/\b[0-9a-f]{12,}\b/gi, '<hex>')
    .replace(/(["'`])[^"'`]{1,200}\1/g, '<value>')
    .replace(/\d+(\.\d+)?/g, '<n>');
}

function sourceLabel(source: {
  destination?: string;
  exchange?: string;
  routingKey?: string;
  partition?: number;
  offset?: string;
}): string | undefined {
  if (source.destination !== undefined) {
    return source.partition === undefined
      ? source.destination
      : `${source.destination}[${source.partition}]@${source.offset ?? '?'}`;
  }
  if (source.exchange !== undefined) return `${source.exchange || '(default)'} / ${source.routingKey ?? ''}`;
  return undefined;
}

/**
 * Reads up to `limit` dead letters without removing any, looks up the inbox status of their ids (one query
 * per consumer), and groups them by consumer, reason and error shape (largest group first).
 *
 * @example
 * const listing = await listDeadLetters({ reader, inbox: new PostgresInboxLookup(db), filter: { consumer: 'orders' } });
 * for (const g of listing.groups) console.log(g.count, g.reason, g.sampleError);
 */
export async function listDeadLetters(options: ListDeadLettersOptions): Promise<DeadLetterListing> {
  const limit = options.limit ?? 1_000;
  const filter = options.filter ?? {};
  const raw: { entry: ListedDeadLetter; shape: string | undefined; fingerprint: string | undefined }[] = [];
  const skip = options.skip ?? 0;
  const keep = options.keep ?? Number.POSITIVE_INFINITY;
  const seen = new Set<string>();
  let read = 0;
  let skipped = 0;
  let more = false;
  for await (const entry of options.reader.browse({ limit })) {
    // Browsing a queue without peek can hand the same message back: count each position once.
    if (seen.has(entry.position)) break;
    seen.add(entry.position);
    read += 1;
    const record = parseDeadLetterHeaders(entry.headers);
    if (!matchesFilter(entry.id, record, filter)) continue;
    const error = record?.error === undefined ? undefined : `${record.error.name}: ${record.error.message}`;
    const listed: ListedDeadLetter = {
      position: entry.position,
      id: entry.id,
      consumer: recordedConsumer(record) ?? filter.consumer,
      reason: record?.reason,
      error,
      attempts: record?.attempts,
      deadLetteredAt: record?.deadLetteredAt,
      source: record === undefined ? undefined : sourceLabel(record.source),
      inboxStatus: 'unknown',
      prediction: 'unknown',
      parked: false,
    };
    if (options.where !== undefined && !options.where(listed)) continue;
    if (skipped < skip) {
      skipped += 1;
      continue;
    }
    if (raw.length >= keep) {
      more = true;
      break;
    }
    options.onSelected?.(entry, listed);
    raw.push({
      fingerprint: replayFingerprint(
        entry,
        record,
        listed.consumer === undefined ? undefined : options.fingerprints?.[listed.consumer],
      ),
      shape: error === undefined ? undefined : errorShape(error),
      entry: listed,
    });
  }

  if (options.inbox !== undefined) {
    const byConsumer = new Map<string, string[]>();
    for (const { entry } of raw) {
      if (entry.consumer === undefined || entry.id === undefined) continue;
      const ids = byConsumer.get(entry.consumer) ?? [];
      ids.push(entry.id);
      byConsumer.set(entry.consumer, ids);
    }
    for (const [consumer, ids] of byConsumer) {
      const rows = await options.inbox.find(consumer, [...new Set(ids)]);
      const undecided = [...rows.values()].filter((r) => r.status === 'dead_lettered' && r.replayCount === 0);
      const audit =
        undecided.length > 0 && options.inbox.lastReplayOutcomes !== undefined
          ? await options.inbox.lastReplayOutcomes(
              consumer,
              undecided.map((r) => r.messageId),
            )
          : new Map<string, string>();
      for (const item of raw) {
        const e = item.entry;
        if (e.consumer !== consumer || e.id === undefined) continue;
        const row = rows.get(e.id);
        item.entry = {
          ...e,
          inboxStatus: row?.status ?? 'none',
          prediction: predictReplay(row, NEXT_REPLAY, item.fingerprint),
          parked: isParked(row, audit.get(e.id)),
        };
      }
    }
  }

  const groups = new Map<
    string,
    {
      group: Omit<DeadLetterGroup, 'inboxStatuses' | 'sampleIds'>;
      statuses: Record<string, number>;
      ids: string[];
    }
  >();
  for (const { entry, shape } of raw) {
    const key = JSON.stringify([entry.consumer, entry.reason, shape]);
    let g = groups.get(key);
    if (g === undefined) {
      g = {
        group: {
          consumer: entry.consumer,
          reason: entry.reason,
          errorShape: shape,
          sampleError: entry.error,
          count: 0,
          oldest: undefined,
          newest: undefined,
        },
        statuses: {},
        ids: [],
      };
      groups.set(key, g);
    }
    const at = entry.deadLetteredAt;
    g.group = {
      ...g.group,
      count: g.group.count + 1,
      oldest: at !== undefined && (g.group.oldest === undefined || at < g.group.oldest) ? at : g.group.oldest,
      newest: at !== undefined && (g.group.newest === undefined || at > g.group.newest) ? at : g.group.newest,
    };
    g.statuses[entry.inboxStatus] = (g.statuses[entry.inboxStatus] ?? 0) + 1;
    if (entry.id !== undefined && g.ids.length < 5) g.ids.push(entry.id);
  }

  return {
    nonDestructiveBrowse: options.reader.nonDestructiveBrowse,
    read,
    truncated: !more && read >= limit,
    skipped,
    more,
    groups: [...groups.values()]
      .map((g) => ({ ...g.group, inboxStatuses: g.statuses, sampleIds: g.ids }))
      .sort((a, b) => b.count - a.count),
    entries: raw.map((r) => r.entry),
  };
}
