// The replay engine (DESIGN §6): moves dead letters back to their source with their original id and a
// replay marker, publish first and remove second, so an interrupted run loses nothing and can be rerun —
// the inbox skips whatever a previous run already applied.

import { randomUUID } from 'node:crypto';
import { parseDeadLetterHeaders, parseReplayMarker } from '@inboxkit/core';
import type {
  DeadLetterEntry,
  DeadLetterQueueReader,
  DeadLetterRecord,
  FingerprintInput,
  FingerprintResolver,
  Publisher,
  TakenDeadLetter,
} from '@inboxkit/core';
import type { InboxRow } from '@inboxkit/core';

import type { InboxLookup, InboxRowStatus } from '../inbox/inbox-lookup.js';
import { systemClock } from './clock.js';
import type { Clock } from './clock.js';
import { isFilterActive, matchesFilter } from './dead-letter-filter.js';
import type { DeadLetterFilter } from './dead-letter-filter.js';
import { isParked, parkedDetail } from './parked.js';
import { predictReplay, REPLAY_PREDICTIONS } from './predict-replay.js';
import type { ReplayPrediction } from './predict-replay.js';
import { RateLimiter } from './rate-limiter.js';
import { recordedConsumer } from './recorded-consumer.js';
import { replayFingerprint } from './replay-fingerprint.js';
import { replayDestination, replayMessage } from './replay-message.js';
import type { ReplayDestination } from './replay-message.js';

/** Options of `replayDeadLetters()`. */
export interface ReplayDeadLettersOptions {
  /** The transport the DLQ belongs to (`kafka`, `rabbitmq`, `sqs`): decides how source headers map to a destination. */
  readonly transport: string;
  /** The DLQ to read. Not closed by the engine. */
  readonly reader: DeadLetterQueueReader;
  /** Publishes replays with the broker's confirmation. Required unless `dryRun`. Not closed by the engine. */
  readonly publisher?: Publisher | undefined;
  /** Reads the inbox for predictions. Without it every prediction is `unknown`. */
  readonly inbox?: InboxLookup | undefined;
  /** Publish every selected dead letter here instead of its recorded source (a topic, queue name or queue URL). */
  readonly to?: string | undefined;
  /**
   * Which dead letters to replay; the others are released untouched. `consumer` also names the consumer of
   * dead letters that carry no inboxkit headers (a broker's own redrive). Default selects everything.
   */
  readonly filter?: DeadLetterFilter | undefined;
  /** Replay at most this many dead letters. Default is no limit: the DLQ as it stood when the run started. */
  readonly limit?: number | undefined;
  /** At most this many publishes per second, evenly spaced. Default is no limit. */
  readonly ratePerSecond?: number | undefined;
  /**
   * Replay parked dead letters too: those whose inbox row was reopened by an earlier replay and dead-lettered
   * again (see `isParked`). Default is `false`: they are left in the DLQ and reported as `parked`, so one bad
   * message cannot loop a bulk replay.
   */
  readonly includeParked?: boolean | undefined;
  /** Read and predict only: publish nothing, remove nothing. Default is `false`. */
  readonly dryRun?: boolean | undefined;
  /**
   * The consumers' `fingerprint` options by consumer name (a `--schemas` module's `fingerprints`), for the
   * `payload-mismatch` prediction of a copy: fingerprinted as its consumer does. Default is none: the whole
   * payload is fingerprinted.
   */
  readonly fingerprints?: Readonly<Record<string, FingerprintResolver<FingerprintInput>>> | undefined;
  /** The replay id written into every replayed message's marker. Default is a random UUID. */
  readonly replayId?: string | undefined;
  /** Who asked for the replay, for the audit record. */
  readonly requestedBy: string;
  /** Default is the system clock. */
  readonly clock?: Clock | undefined;
  /** Aborting stops the run after the entry in hand; nothing taken is lost (it is released). */
  readonly signal?: AbortSignal | undefined;
  /**
   * Called with each dead letter in hand just before its copy is published (never in a dry run): the body to
   * publish instead of the DLQ's (edit and retry), or `refused` to leave it in the DLQ (reported `failed` with
   * the reason). Throwing counts as refused. Default publishes the DLQ's body.
   */
  readonly beforePublish?:
    | ((
        entry: DeadLetterEntry,
        id: string,
      ) => Promise<{ readonly body: string } | { readonly refused: string }>)
    | undefined;
  /** Called once per selected dead letter, after it was handled. */
  readonly onEntry?: ((result: ReplayEntryResult) => void) | undefined;
}

/**
 * What happened to one selected dead letter.
 * - `replayed`: published to its source (confirmed) and removed from the DLQ.
 * - `would-replay`: dry run; it would have been replayed.
 * - `unreplayable`: no message id or no destination; left in the DLQ.
 * - `parked`: a replay of it failed before (its row is dead-lettered again); left in the DLQ unless
 *   `includeParked`.
 * - `failed`: the publish or the removal failed (see `detail`); it is still in the DLQ, a rerun is safe.
 */
export type ReplayAction = 'replayed' | 'would-replay' | 'unreplayable' | 'parked' | 'failed';

/** The outcome for one selected dead letter. */
export interface ReplayEntryResult {
  /** 1-based position among the selected dead letters of this run. */
  readonly index: number;
  /** Where the DLQ copy sat (topic:partition:offset, queue, SQS MessageId). */
  readonly position: string;
  readonly id: string | undefined;
  readonly consumer: string | undefined;
  readonly reason: string | undefined;
  /** Where it was (or would be) published. */
  readonly destination: string | undefined;
  /** The inbox row's status before the replay: `none` = no row, `unknown` = not read. */
  readonly inboxStatus: InboxRowStatus | 'none' | 'unknown';
  readonly prediction: ReplayPrediction;
  readonly action: ReplayAction;
  readonly detail?: string | undefined;
}

/**
 * Why a run ended: `drained` (read to the end), `limit`, `interrupted`, `wrapped` (the reader handed back a
 * copy already seen), `caught-up` (a message this run replayed came back to the DLQ: everything behind it
 * arrived after the run started).
 */
export type ReplayStop = 'drained' | 'limit' | 'interrupted' | 'wrapped' | 'caught-up';

/** The result of a replay run. */
export interface ReplaySummary {
  readonly replayId: string;
  readonly requestedBy: string;
  readonly dryRun: boolean;
  readonly startedAt: Date;
  readonly finishedAt: Date;
  readonly stoppedBecause: ReplayStop;
  /** Dead letters read from the DLQ, selected or not. */
  readonly read: number;
  /** Dead letters outside the filter, left in the DLQ. */
  readonly notSelected: number;
  /**
   * Ids this run replayed that were dead-lettered again while it ran (they failed again): left in the DLQ, not
   * replayed a second time by this run.
   */
  readonly deadLetteredAgain: readonly string[];
  readonly replayed: number;
  readonly wouldReplay: number;
  readonly unreplayable: number;
  /** Parked dead letters left in the DLQ (none with `includeParked`). */
  readonly parked: number;
  readonly failed: number;
  /** Predictions over the replayed (or, in a dry run, would-replay) dead letters. */
  readonly predictions: Readonly<Record<ReplayPrediction, number>>;
  readonly entries: readonly ReplayEntryResult[];
}

interface Inspected {
  readonly record: DeadLetterRecord | undefined;
  readonly consumer: string | undefined;
}

/**
 * The DLQ copy an entry is (its position: topic:partition:offset, SQS MessageId, …). Two copies of one message
 * id are two entries; the same copy handed out twice means the reader came round again.
 */
function identity(entry: DeadLetterEntry): string {
  return entry.position;
}

function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * Replays dead letters from `reader` to their sources through `publisher`, one at a time: publish with the
 * original message id and a replay marker, wait for the broker's confirmation, then remove the entry from
 * the DLQ. Entries outside the filter are released. Never throws for one message's failure: it is counted
 * as `failed` and left in the DLQ; rerunning is always safe because the inbox skips ids already completed.
 *
 * @example
 * const summary = await replayDeadLetters({
 *   transport: 'kafka', reader, publisher, inbox: new PostgresInboxLookup(db),
 *   filter: { reasons: ['max-attempts'] }, ratePerSecond: 50, requestedBy: 'alice',
 * });
 * if (summary.failed > 0) process.exitCode = 1;
 */
export async function replayDeadLetters(options: ReplayDeadLettersOptions): Promise<ReplaySummary> {
  const dryRun = options.dryRun ?? false;
  const publisher = options.publisher;
  if (!dryRun && publisher === undefined) {
    throw new TypeError('replayDeadLetters: a publisher is required unless dryRun is set');
  }
  if (options.limit !== undefined && !(Number.isInteger(options.limit) && options.limit > 0)) {
    throw new RangeError(`replayDeadLetters: limit must be a positive integer, got ${options.limit}`);
  }
  const clock = options.clock ?? systemClock;
  const filter = options.filter ?? {};
  const limiter =
    options.ratePerSecond === undefined ? undefined : new RateLimiter(options.ratePerSecond, clock);
  const replayId = options.replayId ?? randomUUID();
  const startedAt = new Date(clock.now());
  const marker = { replayId, requestedBy: options.requestedBy, requestedAt: startedAt };

  const entries: ReplayEntryResult[] = [];
  const predictions = Object.fromEntries(REPLAY_PREDICTIONS.map((p) => [p, 0])) as Record<
    ReplayPrediction,
    number
  >;
  let read = 0;
  let notSelected = 0;
  let stoppedBecause: ReplayStop = 'drained';
  const released = new Set<string>();
  // (consumer, id) of every copy selected so far: a second copy of a message in the same run is applied by
  // neither (the first reopens or processes it, the second then finds it completed).
  const selectedIds = new Map<string, number>();
  const deadLetteredAgain: string[] = [];
  const aborted = (): boolean => options.signal?.aborted === true;

  /**
   * True for a dead letter this run's own replay produced: it carries this run's replay marker, or — where a
   * transport did not keep the marker — its id was already selected in this run and it was dead-lettered after
   * the run started (or it is the third copy of the id). Two copies that were both in the DLQ before the run
   * are not this: the second is replayed and predicted a duplicate.
   */
  const isBackFromThisRun = (
    entry: DeadLetterEntry,
    record: DeadLetterRecord | undefined,
    consumer: string | undefined,
  ): boolean => {
    if (parseReplayMarker(entry.headers)?.replayId === replayId) return true;
    if (entry.id === undefined) return false;
    const copies = selectedIds.get(`${consumer ?? ''}\u0000${entry.id}`) ?? 0;
    if (copies === 0) return false;
    return copies >= 2 || (record !== undefined && record.deadLetteredAt.getTime() >= startedAt.getTime());
  };

  const inspect = (entry: DeadLetterEntry): Inspected => {
    const record = parseDeadLetterHeaders(entry.headers);
    return { record, consumer: recordedConsumer(record) ?? filter.consumer };
  };

  const lookup = async (
    consumer: string | undefined,
    id: string | undefined,
  ): Promise<{ row: InboxRow | undefined | null; lastReplay?: string | undefined; detail?: string }> => {
    const inbox = options.inbox;
    if (inbox === undefined || consumer === undefined || id === undefined) return { row: null };
    try {
      const row = (await inbox.find(consumer, [id])).get(id);
      // Parking reads the audit only where the row alone does not decide.
      const audit =
        row?.status === 'dead_lettered' && row.replayCount === 0 && inbox.lastReplayOutcomes !== undefined
          ? await inbox.lastReplayOutcomes(consumer, [id])
          : undefined;
      return { row, lastReplay: audit?.get(id) };
    } catch (error) {
      return { row: null, detail: `inbox not readable: ${errorText(error)}` };
    }
  };

  const settle = async (entry: DeadLetterEntry, how: 'release' | 'remove'): Promise<void> => {
    if (dryRun) return;
    const taken = entry as TakenDeadLetter;
    await (how === 'remove' ? taken.remove() : taken.release());
  };

  // Scan the whole DLQ when a filter may skip entries; otherwise ask the reader for exactly `limit`.
  const scanLimit =
    isFilterActive(filter) || options.limit === undefined ? Number.MAX_SAFE_INTEGER : options.limit;
  const source: AsyncIterable<DeadLetterEntry> = dryRun
    ? options.reader.browse({ limit: scanLimit })
    : options.reader.take({ limit: scanLimit });

  for await (const entry of source) {
    const { record, consumer } = inspect(entry);
    const key = identity(entry);
    if (aborted()) {
      await settle(entry, 'release');
      stoppedBecause = 'interrupted';
      break;
    }
    if (released.has(key)) {
      // A reader handed back a copy this run already released (a queue that requeues at once): the DLQ has
      // been seen whole. The inboxkit readers hold released messages until the run ends, so this is a guard.
      await settle(entry, 'release');
      stoppedBecause = 'wrapped';
      break;
    }
    if (isBackFromThisRun(entry, record, consumer)) {
      // Replayed by this run and dead-lettered again: the DLQ has been read up to where the run started.
      if (entry.id !== undefined) deadLetteredAgain.push(entry.id);
      await settle(entry, 'release');
      stoppedBecause = 'caught-up';
      break;
    }
    read += 1;
    if (!matchesFilter(entry.id, record, filter)) {
      notSelected += 1;
      released.add(key);
      await settle(entry, 'release');
      continue;
    }
    if (dryRun) released.add(key);

    const { row, lastReplay, detail: lookupDetail } = await lookup(consumer, entry.id);
    const idKey = `${consumer ?? ''}\u0000${entry.id ?? ''}`;
    const earlierCopy = entry.id !== undefined && selectedIds.has(idKey);
    if (entry.id !== undefined) selectedIds.set(idKey, (selectedIds.get(idKey) ?? 0) + 1);
    const rowPrediction = predictReplay(
      row,
      replayId,
      replayFingerprint(entry, record, consumer === undefined ? undefined : options.fingerprints?.[consumer]),
    );
    const prediction: ReplayPrediction =
      earlierCopy && (rowPrediction === 'reopen' || rowPrediction === 'process')
        ? 'skip-duplicate'
        : rowPrediction;
    const predictionDetail = earlierCopy
      ? 'another copy of this id was selected earlier in this run'
      : undefined;
    const base = {
      index: entries.length + 1,
      position: entry.position,
      id: entry.id,
      consumer,
      reason: record?.reason,
      inboxStatus: row === null ? ('unknown' as const) : (row?.status ?? ('none' as const)),
      prediction,
    };
    const destination = replayDestination(options.transport, record, options.to);
    let result: ReplayEntryResult;
    if (entry.id === undefined || typeof destination === 'string') {
      released.add(key);
      result = {
        ...base,
        destination: typeof destination === 'string' ? undefined : destination.label,
        action: 'unreplayable',
        detail: typeof destination === 'string' ? destination : 'the dead letter has no message id',
      };
      await settle(entry, 'release').catch(() => undefined);
    } else if (options.includeParked !== true && isParked(row, lastReplay)) {
      released.add(key);
      result = {
        ...base,
        destination: destination.label,
        action: 'parked',
        detail: parkedDetail(row, lastReplay),
      };
      await settle(entry, 'release');
    } else if (dryRun) {
      result = {
        ...base,
        destination: destination.label,
        action: 'would-replay',
        detail: lookupDetail ?? predictionDetail,
      };
      predictions[prediction] += 1;
    } else {
      await limiter?.acquire(options.signal);
      if (aborted()) {
        await settle(entry, 'release');
        stoppedBecause = 'interrupted';
        break;
      }
      result = await replayOne(
        entry as TakenDeadLetter,
        entry.id,
        destination,
        base,
        lookupDetail ?? predictionDetail,
      );
      if (result.action === 'failed') released.add(key);
      else predictions[prediction] += 1;
    }
    entries.push(result);
    options.onEntry?.(result);
    if (options.limit !== undefined && entries.length >= options.limit) {
      stoppedBecause = 'limit';
      break;
    }
  }
  if (stoppedBecause === 'drained' && aborted()) stoppedBecause = 'interrupted';

  const count = (action: ReplayAction): number => entries.filter((e) => e.action === action).length;
  return {
    replayId,
    requestedBy: options.requestedBy,
    dryRun,
    startedAt,
    finishedAt: new Date(clock.now()),
    stoppedBecause,
    read,
    notSelected,
    deadLetteredAgain,
    replayed: count('replayed'),
    wouldReplay: count('would-replay'),
    unreplayable: count('unreplayable'),
    parked: count('parked'),
    failed: count('failed'),
    predictions,
    entries,
  };

  async function replayOne(
    entry: TakenDeadLetter,
    id: string,
    destination: ReplayDestination,
    base: Omit<ReplayEntryResult, 'destination' | 'action' | 'detail'>,
    lookupDetail: string | undefined,
  ): Promise<ReplayEntryResult> {
    const withDestination = { ...base, destination: destination.label };
    let body = entry.body;
    if (options.beforePublish !== undefined) {
      let decided: { readonly body: string } | { readonly refused: string };
      try {
        decided = await options.beforePublish(entry, id);
      } catch (error) {
        decided = { refused: errorText(error) };
      }
      if ('refused' in decided) {
        await entry.release().catch(() => undefined);
        return { ...withDestination, action: 'failed', detail: `not published: ${decided.refused}` };
      }
      body = decided.body;
    }
    try {
      await publisher!.publish([replayMessage({ ...entry, body }, id, destination, marker)]);
    } catch (error) {
      await entry.release().catch(() => undefined);
      return { ...withDestination, action: 'failed', detail: `publish failed: ${errorText(error)}` };
    }
    try {
      await entry.remove();
    } catch (error) {
      return {
        ...withDestination,
        action: 'failed',
        detail: `published, but not removed from the DLQ (${errorText(error)}); a rerun replays it again and the inbox skips it`,
      };
    }
    return { ...withDestination, action: 'replayed', detail: lookupDetail };
  }
}
