// What the console's page asks for, answered from the inbox (core's inspection API) and the DLQs (the CLI's
// listing and replay engine). Every action that moves a message goes through `replayFromDlq`, the path of
// `inboxkit dlq replay`: publish with the broker's confirmation, then remove; the inbox decides the rest.

import { createHash, randomUUID } from 'node:crypto';

import { parseDeadLetterHeaders, parseOperatorAudit } from '@inboxkit/core';
import type { PostgresInboxStore, RetireDeadLettersResult } from '@inboxkit/core/postgres';
import { discardFromDlq } from '../replay/discard-from-dlq.js';
import type { DiscardFromDlqResult } from '../replay/discard-from-dlq.js';
import type { DeadLetterEntry, ForgetResult, InboxInspector, InboxStore } from '@inboxkit/core';
import type { FastPathEntries } from '../inbox/fast-path-entries.js';

import type { CliServices } from '../cli-services.js';
import type { InboxLookup } from '../inbox/inbox-lookup.js';
import type { Clock } from '../replay/clock.js';
import type { DeadLetterFilter } from '../replay/dead-letter-filter.js';
import { listDeadLetters } from '../replay/list-dead-letters.js';
import type { ListedDeadLetter } from '../replay/list-dead-letters.js';
import { displayName } from '../output/display-text.js';
import { describePrediction, predictReplay } from '../replay/predict-replay.js';
import { recordedConsumer } from '../replay/recorded-consumer.js';
import { replayFingerprint } from '../replay/replay-fingerprint.js';
import { editAndRetry } from '../replay/edit-and-retry.js';
import type { EditAndRetryResult } from '../replay/edit-and-retry.js';
import { replayFromDlq } from '../replay/replay-from-dlq.js';
import { rateProblem } from '../replay/rate-limiter.js';
import type { ConsumerFingerprints, ConsumerSchemas } from '../settings/load-schemas.js';
import type { ReplaySummary } from '../replay/replay-dead-letters.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { dlqId } from './console-dlq.js';
import type { ConsoleDlq } from './console-dlq.js';
import { ReplayJobs } from './replay-jobs.js';
import type { ReplayJobView } from './replay-jobs.js';
import { StateSampler } from './state-sampler.js';

/** An error the page is shown as it is, with its HTTP status. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
    /** Headers the answer carries (`allow` of a 405). Default is none. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/** What the API works with. */
export interface ConsoleApiOptions {
  readonly dlqs: readonly ConsoleDlq[];
  readonly services: CliServices;
  readonly connection: ConnectionSettings;
  readonly inspector: InboxInspector;
  /** The inbox's operator acts (edit and retry, forget one id). */
  readonly store: Pick<InboxStore, 'findRows' | 'amendDeadLetter' | 'forgetCompleted' | 'identity'>;
  /** The consumers' Redis fast path, whose entry for an id `forget` deletes too. Default is none. */
  readonly fastPath?: FastPathEntries | undefined;
  /**
   * The dead-letter lifecycle (discard, archive) and where a broker-only discard is audited. Default is none:
   * the page's Discard and Archive answer 501.
   */
  readonly lifecycle?:
    | Pick<PostgresInboxStore, 'discardDeadLetters' | 'archiveDeadLetters' | 'findRows' | 'recordReplay'>
    | undefined;
  /** The consumers' payload schemas: edits are checked against them. Default is none (JSON only). */
  readonly schemas?: ConsumerSchemas | undefined;
  /** The consumers' `fingerprint` options: edits are fingerprinted with them. Default is none (the whole payload). */
  readonly fingerprints?: ConsumerFingerprints | undefined;
  readonly lookup: InboxLookup;
  readonly clock: Clock;
  readonly sampleIntervalMs: number;
  readonly log: (line: string) => void;
}

/** The most dead letters one listing reads (the scan); only one page of them is kept. */
const MAX_LISTING = 1_000_000;
/** Reads of one listing unless it says otherwise. */
const DEFAULT_LISTING = 100_000;
/** Dead letters on one page: the default and the most. */
const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 500;
/** The bytes of a body a listing keeps for the page (`POST /api/message-body` reads one whole). */
export const BODY_PREVIEW_BYTES = 16_384;
/** Listings whose pages the console keeps, newest first, so a row of an older one still opens. */
const KEPT_LISTINGS = 8;
/** Dead-lettered rows read for the per-hour chart. */
const HOURLY_ROWS = 10_000;
const HOUR = 3_600_000;

/** A dead letter as the page lists it. */
export interface ConsoleDeadLetter extends ListedDeadLetter {
  /** The DLQ it was read from (`transport:name`). */
  readonly dlq: string;
  /** The body's size in bytes (the listing keeps at most `BODY_PREVIEW_BYTES` of it). */
  readonly bodyBytes: number;
}

function bytes(body: DeadLetterEntry['body']): Buffer {
  if (body === null) return Buffer.alloc(0);
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A dead letter as a listing keeps it: headers, at most `BODY_PREVIEW_BYTES` of its body, and its size. */
interface KeptDeadLetter {
  readonly entry: DeadLetterEntry;
  readonly bodyBytes: number;
  readonly bodySha256: string;
  readonly bodyTruncated: boolean;
  /** The replay fingerprint of the whole body as its consumer takes it (the prediction's), taken while in hand. */
  readonly fingerprint: string | undefined;
}

function kept(entry: DeadLetterEntry, fingerprints: ConsumerFingerprints | undefined): KeptDeadLetter {
  const whole = bytes(entry.body);
  const bodyTruncated = whole.length > BODY_PREVIEW_BYTES;
  // A copy: a slice would keep the whole buffer alive.
  const preview = bodyTruncated ? Buffer.from(whole.subarray(0, BODY_PREVIEW_BYTES)) : whole;
  return {
    entry: { ...entry, body: entry.body === null ? null : preview },
    bodyBytes: whole.length,
    bodySha256: sha256(whole),
    bodyTruncated,
    fingerprint: fingerprintAsItsConsumer(entry, fingerprints),
  };
}

/** The replay fingerprint as the dead letter's own consumer takes it (its `fingerprint` option, if given). */
function fingerprintAsItsConsumer(entry: DeadLetterEntry, fingerprints: ConsumerFingerprints | undefined) {
  const record = parseDeadLetterHeaders(entry.headers);
  const consumer = recordedConsumer(record);
  return replayFingerprint(entry, record, consumer === undefined ? undefined : fingerprints?.[consumer]);
}

/** A whole number of `field` from `min` to `max`, `fallback` when absent. */
function wholeNumber(value: unknown, field: string, fallback: number, min: number, max: number): number {
  const n = value === undefined || value === null || value === '' ? fallback : Number(value);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new HttpError(400, `${field} must be a whole number from ${min} to ${max}`);
  return n;
}

/** Postgres text cannot hold a NUL: a value with one is bad input (400), never a failed query (500). */
function withoutNul<T extends string | null>(value: T, field: string): T {
  if (value !== null && value.includes('\u0000'))
    throw new HttpError(400, `${field} contains a NUL character (U+0000), which no id or name can hold`);
  return value;
}

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new HttpError(400, `${field} must be a string`);
  return withoutNul(value, field);
}

function stringList(value: unknown, field: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v === '')) {
    throw new HttpError(400, `${field} must be a list of non-empty strings`);
  }
  for (const v of value as string[]) withoutNul(v, field);
  return value.length === 0 ? undefined : (value as string[]);
}

function time(value: unknown, field: string): Date | undefined {
  const raw = optionalString(value, field);
  if (raw === undefined) return undefined;
  const date = new Date(raw);
  if (Number.isNaN(date.getTime()))
    throw new HttpError(400, `${field} must be an ISO 8601 time, got ${JSON.stringify(raw)}`);
  return date;
}

/** The page's selection of dead letters, as the replay engine's filter. */
function selection(body: Record<string, unknown>): DeadLetterFilter {
  return {
    consumer: optionalString(body.consumer, 'consumer'),
    reasons: stringList(body.reasons, 'reasons'),
    since: time(body.since, 'since'),
    ids: stringList(body.ids, 'ids'),
  };
}

function required(value: unknown, field: string): string {
  const text = optionalString(value, field);
  if (text === undefined || text.trim() === '') throw new HttpError(400, `${field} is required`);
  return text;
}

/** `includeParked`: replay parked dead letters too (default false). */
function includeParked(body: Record<string, unknown>): boolean {
  const value = body.includeParked;
  if (value !== undefined && value !== null && typeof value !== 'boolean')
    throw new HttpError(400, 'includeParked must be true or false');
  return value === true;
}

/** One line of the operator audit as the page shows it. */
export interface AuditLine {
  readonly at: string;
  readonly consumer: string;
  readonly messageId: string;
  readonly actionId: string;
  readonly requestedBy: string | null;
  /** `discarded`, `archived`, `forgotten`, `amended`, or `replayed` (a replay's own line). */
  readonly action: string;
  readonly outcome: string;
}

const AUDIT_ACTIONS: readonly string[] = ['discarded', 'archived', 'forgotten', 'amended', 'replayed'];

/** The ids of a discard or archive: `ids` (one or more) or `id`. */
function retireIds(body: Record<string, unknown>): string[] {
  const ids =
    body.ids === undefined
      ? body.id === undefined
        ? undefined
        : [required(body.id, 'id')]
      : stringList(body.ids, 'ids');
  if (ids === undefined || ids.length === 0)
    throw new HttpError(400, 'ids is required: the dead letters to act on');
  return [...ids];
}

/** The console's API, independent of HTTP (the server maps routes onto these methods). */
export class ConsoleApi {
  readonly #options: ConsoleApiOptions;
  readonly sampler: StateSampler;
  readonly jobs = new ReplayJobs();
  /**
   * The pages of the last listings (by listing id; each with its DLQ and its entries by position), newest last:
   * one message's record is shown from them without reading the DLQ again. Bounded: `KEPT_LISTINGS` pages of
   * at most `MAX_PAGE_SIZE` entries of at most `BODY_PREVIEW_BYTES` of body.
   */
  readonly #listings = new Map<string, { dlq: string; entries: Map<string, KeptDeadLetter> }>();

  constructor(options: ConsoleApiOptions) {
    this.#options = options;
    this.sampler = new StateSampler(options.inspector, options.clock, {
      intervalMs: options.sampleIntervalMs,
    });
  }

  /** Starts sampling the inbox. */
  async start(): Promise<void> {
    await this.sampler.start();
  }

  /** Stops sampling and every running replay (after the message in hand). */
  async stop(): Promise<void> {
    await this.jobs.stop();
    await this.sampler.stop();
  }

  #dlq(id: unknown): ConsoleDlq {
    const dlqs = this.#options.dlqs;
    if (id === undefined || id === null || id === '') {
      if (dlqs.length === 1) return dlqs[0]!;
      throw new HttpError(
        400,
        dlqs.length === 0
          ? 'the console was started without --dlq: no DLQ to read'
          : 'dlq is required: one of ' + dlqs.map(dlqId).join(', '),
      );
    }
    const found = dlqs.find((d) => dlqId(d) === id);
    if (found === undefined)
      throw new HttpError(
        400,
        `unknown dlq ${JSON.stringify(id)}: one of ${dlqs.map(dlqId).join(', ') || '(none)'}`,
      );
    return found;
  }

  /** Per consumer: rows by state, dead letters by reason, stuck work, recent replays, the charts' data. */
  async overview(): Promise<unknown> {
    const { inspector, clock } = this.#options;
    const now = clock.now();
    const [counts, reasons, processing, replays] = await Promise.all([
      inspector.countByStatus(),
      inspector.countDeadLettersByReason(),
      inspector.listProcessing({ limit: 50 }),
      inspector.listReplays({ limit: 200 }),
    ]);
    const names = [...new Set([...counts.map((c) => c.consumer), ...replays.map((r) => r.consumer)])].sort();
    const hourStart = Math.floor(now / HOUR) * HOUR - 23 * HOUR;
    const consumers = await Promise.all(
      names.map(async (consumer) => {
        const rows = { processing: 0, failed: 0, completed: 0, dead_lettered: 0, discarded: 0, archived: 0 };
        for (const c of counts) if (c.consumer === consumer) rows[c.status] = c.count;
        const deadLetteredPerHour = new Array<number>(24).fill(0);
        const replayedPerHour = new Array<number>(24).fill(0);
        if (rows.dead_lettered > 0) {
          for (const row of await inspector.listDeadLetters({
            consumer,
            since: new Date(hourStart),
            limit: HOURLY_ROWS,
          })) {
            const at = row.deadLetteredAt?.getTime();
            if (at !== undefined && at >= hourStart)
              deadLetteredPerHour[Math.min(23, Math.floor((at - hourStart) / HOUR))]! += 1;
          }
        }
        for (const r of replays) {
          const at = r.at.getTime();
          if (r.consumer === consumer && at >= hourStart)
            replayedPerHour[Math.min(23, Math.floor((at - hourStart) / HOUR))]! += 1;
        }
        return {
          consumer,
          rows,
          deadLettersByReason: Object.fromEntries(
            reasons.filter((r) => r.consumer === consumer).map((r) => [r.reason, r.count]),
          ),
          processing: processing.filter((p) => p.consumer === consumer).slice(0, 5),
          replays: replays.filter((r) => r.consumer === consumer).slice(0, 10),
          hourStart: new Date(hourStart),
          deadLetteredPerHour,
          replayedPerHour,
        };
      }),
    );
    return {
      at: new Date(now),
      dlqs: this.#options.dlqs.map((d) => ({ id: dlqId(d), transport: d.transport, name: d.name })),
      consumers,
      samples: this.sampler.samples,
      sampleIntervalMs: this.#options.sampleIntervalMs,
      samplerError: this.sampler.error,
      jobs: this.jobs.list().map((j) => ({ ...j, entries: undefined })),
    };
  }

  /**
   * One page of the dead letters of one DLQ that match the page's filters (a JSON body: `POST
   * /api/dead-letters`, since reading a RabbitMQ or SQS DLQ receives and releases): `consumer`, `reasons` (or
   * `reason`, comma-separated), `since`/`until` (dead-lettered time), `search` (a piece of the id, the error,
   * the reason or the consumer); `offset` (matching entries to pass over, default 0) and `pageSize` (default
   * 100, at most 500); `limit` (entries read at most, default 100,000, at most 1,000,000). The DLQ is read as a
   * stream: only the page is kept, each body cut to `BODY_PREVIEW_BYTES`. `more` says another page exists.
   */
  async deadLetters(body: Record<string, unknown>): Promise<unknown> {
    const dlq = this.#dlq(body.dlq);
    const reasons = [
      ...(stringList(body.reasons, 'reasons') ?? []),
      ...(optionalString(body.reason, 'reason') ?? '').split(','),
    ]
      .map((r) => r.trim())
      .filter(Boolean);
    const since = time(body.since, 'since');
    const until = time(body.until, 'until');
    const search = (optionalString(body.search, 'search') ?? '').trim().toLowerCase();
    const limit = wholeNumber(body.limit, 'limit', DEFAULT_LISTING, 1, MAX_LISTING);
    const offset = wholeNumber(body.offset, 'offset', 0, 0, MAX_LISTING);
    const pageSize = wholeNumber(body.pageSize, 'pageSize', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE);
    const filter: DeadLetterFilter = {
      consumer: optionalString(body.consumer, 'consumer'),
      reasons: reasons.length === 0 ? undefined : reasons,
      since,
    };
    const page = new Map<string, KeptDeadLetter>();
    const transport = await this.#options.services.openTransport(dlq.transport, this.#options.connection, {
      from: dlq.name,
      group: dlq.group,
      publish: false,
    });
    let listing;
    try {
      listing = await listDeadLetters({
        reader: transport.reader,
        inbox: this.#options.lookup,
        filter,
        limit,
        skip: offset,
        keep: pageSize,
        where: (e) =>
          (until === undefined ||
            (e.deadLetteredAt !== undefined && e.deadLetteredAt.getTime() < until.getTime())) &&
          (search === '' ||
            [e.id, e.error, e.reason, e.consumer].some(
              (v) => v !== undefined && v.toLowerCase().includes(search),
            )),
        fingerprints: this.#options.fingerprints,
        onSelected: (entry) => page.set(entry.position, kept(entry, this.#options.fingerprints)),
      });
    } finally {
      await transport.close().catch(() => undefined);
    }
    const listingId = randomUUID();
    this.#listings.set(listingId, { dlq: dlqId(dlq), entries: page });
    for (const old of this.#listings.keys()) {
      if (this.#listings.size <= KEPT_LISTINGS) break;
      this.#listings.delete(old);
    }
    const entries: ConsoleDeadLetter[] = listing.entries.map((e) => ({
      ...e,
      dlq: dlqId(dlq),
      bodyBytes: page.get(e.position)?.bodyBytes ?? 0,
    }));
    return {
      dlq: dlqId(dlq),
      listing: listingId,
      nonDestructiveBrowse: listing.nonDestructiveBrowse,
      read: listing.read,
      truncated: listing.truncated,
      offset,
      pageSize,
      more: listing.more,
      entries,
    };
  }

  #kept(dlq: string, listingId: string | null, position: string): KeptDeadLetter | undefined {
    if (listingId !== null && listingId !== '') {
      const listing = this.#listings.get(listingId);
      return listing?.dlq === dlq ? listing.entries.get(position) : undefined;
    }
    // No listing named: the newest listing of this DLQ.
    for (const listing of [...this.#listings.values()].reverse())
      if (listing.dlq === dlq) return listing.entries.get(position);
    return undefined;
  }

  /**
   * The whole body of one listed dead letter (`{dlq, listing, position}`), read from the DLQ again: the entry
   * with the listed id whose body has the listed digest. A POST, as reading receives and releases on RabbitMQ
   * and SQS. 404 when it is no longer in the DLQ (replayed meanwhile) or its listing was let go.
   */
  async messageBody(body: Record<string, unknown>): Promise<Buffer> {
    const dlq = this.#dlq(body.dlq);
    const position = required(body.position, 'position');
    const listingId = optionalString(body.listing, 'listing') ?? null;
    const known = this.#kept(dlqId(dlq), listingId, position);
    if (known === undefined)
      throw new HttpError(
        404,
        `no dead letter at ${JSON.stringify(position)} in a recent listing of ${dlqId(dlq)}: list the DLQ again`,
      );
    const transport = await this.#options.services.openTransport(dlq.transport, this.#options.connection, {
      from: dlq.name,
      group: dlq.group,
      publish: false,
    });
    try {
      const seen = new Set<string>();
      for await (const entry of transport.reader.browse({ limit: MAX_LISTING })) {
        if (seen.has(entry.position)) break;
        seen.add(entry.position);
        if (entry.id !== known.entry.id) continue;
        const whole = bytes(entry.body);
        if (whole.length === known.bodyBytes && sha256(whole) === known.bodySha256) return whole;
      }
    } finally {
      await transport.close().catch(() => undefined);
    }
    throw new HttpError(
      404,
      `${known.entry.id ?? 'the dead letter'} is no longer in ${dlqId(dlq)} with that body (replayed or removed meanwhile?): list the DLQ again`,
    );
  }

  /**
   * One message's full record: the DLQ copy (headers, payload, the dead-letter facts) from the last listing,
   * its inbox row, its replay history and what a replay would do now.
   */
  async message(query: URLSearchParams): Promise<unknown> {
    const { inspector } = this.#options;
    const dlqParam = query.get('dlq');
    const position = withoutNul(query.get('position'), 'position');
    withoutNul(query.get('consumer'), 'consumer');
    withoutNul(query.get('id'), 'id');
    let entry: DeadLetterEntry | undefined;
    let dlq: string | undefined;
    let held: KeptDeadLetter | undefined;
    if (position !== null && position !== '') {
      dlq = dlqId(this.#dlq(dlqParam));
      held = this.#kept(dlq, withoutNul(query.get('listing'), 'listing'), position);
      entry = held?.entry;
      if (entry === undefined)
        throw new HttpError(
          404,
          `no dead letter at ${JSON.stringify(position)} in a recent listing of ${dlq}: list the DLQ again`,
        );
    }
    const record = entry === undefined ? undefined : parseDeadLetterHeaders(entry.headers);
    const consumer = recordedConsumer(record) ?? (query.get('consumer') || undefined);
    const id = entry?.id ?? (query.get('id') || undefined);
    if (id === undefined || consumer === undefined) {
      throw new HttpError(
        400,
        'give dlq and position (a listed dead letter), or consumer and id (an inbox row)',
      );
    }
    const [[row], replays] = await Promise.all([
      inspector.findRows(consumer, [id]),
      inspector.listReplays({ consumer, messageId: id, limit: 100 }),
    ]);
    const prediction = predictReplay(row, '\u0000next-replay', held?.fingerprint);
    return {
      dlq,
      consumer,
      id,
      deadLetter:
        entry === undefined
          ? undefined
          : {
              position: entry.position,
              headers: entry.headers,
              body: bytes(entry.body).toString('utf8'),
              // The body above is its first BODY_PREVIEW_BYTES when cut: POST /api/message-body has it whole.
              bodyBytes: held?.bodyBytes ?? 0,
              bodyTruncated: held?.bodyTruncated ?? false,
              record,
            },
      row: row ?? null,
      replays,
      prediction,
      predictionText: describePrediction(prediction),
    };
  }

  /** A dry run of a replay of the selection: per message, what would happen. Publishes and removes nothing. */
  async dryRun(body: Record<string, unknown>, requestedBy: string): Promise<ReplaySummary> {
    const dlq = this.#dlq(body.dlq);
    const { services, connection, lookup, clock } = this.#options;
    return replayFromDlq(
      {
        transport: dlq.transport,
        from: dlq.name,
        group: dlq.group,
        filter: selection(body),
        dryRun: true,
        includeParked: includeParked(body),
        replayId: randomUUID(),
        requestedBy,
      },
      { services, connection, inbox: lookup, clock },
    );
  }

  /**
   * Edit and retry of one dead letter (`{dlq, consumer, id, payload, reason}`): checked against the consumer's
   * schema, amended (audited, by `requestedBy`) and replayed once through `editAndRetry`. A refusal — the
   * schema's message, a row that is not dead-lettered, a copy no longer in the DLQ — is a 422 and changes
   * nothing.
   */
  async edit(body: Record<string, unknown>, requestedBy: string): Promise<EditAndRetryResult> {
    const dlq = this.#dlq(body.dlq);
    const consumer = required(body.consumer, 'consumer');
    const messageId = required(body.id, 'id');
    const payload = optionalString(body.payload, 'payload') ?? '';
    const reason = required(body.reason, 'reason');
    const { services, connection, lookup, clock, log, store, schemas, fingerprints } = this.#options;
    const replayId = randomUUID();
    const result = await editAndRetry(
      {
        transport: dlq.transport,
        from: dlq.name,
        group: dlq.group,
        consumer,
        messageId,
        payload,
        reason,
        requestedBy,
        replayId,
        schema: schemas?.[consumer],
        fingerprint: fingerprints?.[consumer],
      },
      { services, connection, store, inbox: lookup, clock },
    );
    if (result.kind === 'refused') throw new HttpError(422, result.why);
    log(
      `edit ${replayId} by ${displayName(requestedBy)} of ${displayName(messageId)} (${displayName(consumer)}): ${result.kind}${result.amended ? `, amended ${result.fromFingerprint ?? 'none'} -> ${result.toFingerprint}` : ''}`,
    );
    return result;
  }

  /**
   * Forget one id (`{consumer, id, reason}`): its completed row deleted, audited, then its fast-path entry
   * (`fastPathEntry`: `deleted`, `not-deleted` with `fastPathError`, or `no-fast-path` when the console has
   * no --redis-url). Anything else is a 409.
   */
  async forget(
    body: Record<string, unknown>,
    requestedBy: string,
  ): Promise<
    ForgetResult & {
      actionId: string;
      fastPathEntry?: 'deleted' | 'not-deleted' | 'no-fast-path';
      fastPathError?: string;
    }
  > {
    const consumer = required(body.consumer, 'consumer');
    const messageId = required(body.id, 'id');
    const reason = required(body.reason, 'reason');
    const actionId = randomUUID();
    const forget = this.#options.store.forgetCompleted?.bind(this.#options.store);
    if (forget === undefined) throw new HttpError(501, 'this inbox store cannot forget a row');
    const result = await forget({ consumer, messageId, actionId, requestedBy, reason });
    if (result.kind === 'no-row')
      throw new HttpError(409, `${messageId} has no inbox row in consumer ${consumer}`);
    if (result.kind === 'not-completed') {
      throw new HttpError(409, `${messageId} is ${result.row.status}: only a completed row is forgotten`);
    }
    const entry = await this.#forgetFastPathEntry(consumer, messageId);
    this.#options.log(
      `forget ${actionId} by ${displayName(requestedBy)} of ${displayName(messageId)} (${displayName(consumer)}); fast-path entry: ${entry.fastPathEntry}`,
    );
    return { actionId, ...result, ...entry };
  }

  /**
   * Discards dead letters (`{consumer, ids, reason, dlq?}`; `ids` one or more): their rows become discarded,
   * each audited with who (the console's operator), why and its state before; with `dlq`, their copies in that
   * DLQ are then removed (and a copy the inbox holds no live row for is audited and removed). Nothing matched
   * is a 409.
   */
  async discard(
    body: Record<string, unknown>,
    requestedBy: string,
  ): Promise<RetireDeadLettersResult & { dlq?: DiscardFromDlqResult }> {
    const lifecycle = this.#lifecycle();
    const consumer = required(body.consumer, 'consumer');
    const ids = retireIds(body);
    const reason = required(body.reason, 'reason');
    const dlq =
      body.dlq === undefined || body.dlq === null || body.dlq === '' ? undefined : this.#dlq(body.dlq);
    const actionId = randomUUID();
    const result = await lifecycle.discardDeadLetters({
      consumer,
      messageIds: ids,
      reason,
      requestedBy,
      actionId,
    });
    let broker: DiscardFromDlqResult | undefined;
    if (dlq !== undefined) {
      const transport = await this.#options.services.openTransport(dlq.transport, this.#options.connection, {
        from: dlq.name,
        group: dlq.group,
        publish: false,
      });
      try {
        broker = await discardFromDlq({
          reader: transport.reader,
          store: lifecycle,
          filter: { consumer, ids },
          actionId,
          requestedBy,
          reason,
        });
      } finally {
        await transport.close().catch(() => undefined);
      }
    }
    if (
      result.changed.length === 0 &&
      (broker === undefined || broker.removed.length + broker.removedBrokerOnly.length === 0)
    ) {
      throw new HttpError(409, `no dead letter of consumer ${consumer} to discard among ${ids.join(', ')}`);
    }
    this.#options.log(
      `discard ${actionId} by ${displayName(requestedBy)} of ${result.changed.length} dead letter(s) (${displayName(consumer)})${broker === undefined ? '' : `; DLQ copies removed: ${broker.removed.length + broker.removedBrokerOnly.length}`}`,
    );
    return broker === undefined ? result : { ...result, dlq: broker };
  }

  /** Archives dead letters (`{consumer, ids, reason}`), audited; their DLQ copies stay. Nothing matched is a 409. */
  async archive(body: Record<string, unknown>, requestedBy: string): Promise<RetireDeadLettersResult> {
    const lifecycle = this.#lifecycle();
    const consumer = required(body.consumer, 'consumer');
    const ids = retireIds(body);
    const reason = required(body.reason, 'reason');
    const actionId = randomUUID();
    const result = await lifecycle.archiveDeadLetters({
      consumer,
      messageIds: ids,
      reason,
      requestedBy,
      actionId,
    });
    if (result.changed.length === 0)
      throw new HttpError(409, `no dead letter of consumer ${consumer} to archive among ${ids.join(', ')}`);
    this.#options.log(
      `archive ${actionId} by ${displayName(requestedBy)} of ${result.changed.length} dead letter(s) (${displayName(consumer)})`,
    );
    return result;
  }

  /**
   * The operator audit, newest first (`consumer`, `action` = discarded | archived | forgotten | amended |
   * replayed, `limit` up to 500, default 200): every line with its act read back where it is one.
   */
  async audit(params: URLSearchParams): Promise<{ lines: AuditLine[] }> {
    const consumer = params.get('consumer') ?? undefined;
    const action = params.get('action') ?? undefined;
    const limitText = params.get('limit');
    const limit = limitText === null ? 200 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 500)
      throw new HttpError(400, 'limit must be a whole number from 1 to 500');
    if (action !== undefined && !AUDIT_ACTIONS.includes(action)) {
      throw new HttpError(400, `action must be one of ${AUDIT_ACTIONS.join(', ')}`);
    }
    const rows = await this.#options.inspector.listReplays({
      ...(consumer === undefined ? {} : { consumer }),
      limit: action === undefined ? limit : 500,
    });
    const lines = rows.map((r): AuditLine => {
      const act = parseOperatorAudit(r.outcome);
      return {
        at: r.at.toISOString(),
        consumer: r.consumer,
        messageId: r.messageId,
        actionId: r.replayId,
        requestedBy: r.requestedBy ?? null,
        action: act?.action ?? (r.outcome.startsWith('discarded dlq-only/') ? 'discarded' : 'replayed'),
        outcome: r.outcome,
      };
    });
    return {
      lines: (action === undefined ? lines : lines.filter((l) => l.action === action)).slice(0, limit),
    };
  }

  #lifecycle(): NonNullable<ConsoleApiOptions['lifecycle']> {
    const lifecycle = this.#options.lifecycle;
    if (lifecycle === undefined) throw new HttpError(501, 'this inbox store has no dead-letter lifecycle');
    return lifecycle;
  }

  /** Deletes a forgotten id's fast-path entry, after its row (docs/fast-path.md); says how it went. */
  async #forgetFastPathEntry(
    consumer: string,
    messageId: string,
  ): Promise<{ fastPathEntry: 'deleted' | 'not-deleted' | 'no-fast-path'; fastPathError?: string }> {
    const { fastPath, store } = this.#options;
    if (fastPath === undefined) return { fastPathEntry: 'no-fast-path' };
    try {
      if (store.identity === undefined) throw new Error('this inbox store cannot say its identity');
      await fastPath.forget(await store.identity(), consumer, messageId);
      return { fastPathEntry: 'deleted' };
    } catch (error) {
      return {
        fastPathEntry: 'not-deleted',
        fastPathError: error instanceof Error ? error.message : String(error),
      };
    }
  }

  /**
   * Starts a replay of the selection at `ratePerSecond` (optional) and returns its job at once; the page
   * follows it through `jobs.watch`. A selection of nothing (no ids, reasons, consumer or since) needs
   * `all: true`.
   */
  startReplay(body: Record<string, unknown>, requestedBy: string): ReplayJobView {
    const dlq = this.#dlq(body.dlq);
    const filter = selection(body);
    const empty =
      filter.consumer === undefined &&
      filter.reasons === undefined &&
      filter.since === undefined &&
      filter.ids === undefined;
    if (empty && body.all !== true) {
      throw new HttpError(
        400,
        'select dead letters (ids, reasons, consumer or since), or send all: true to replay the whole DLQ',
      );
    }
    const rate = body.ratePerSecond;
    if (rate !== undefined && rate !== null && (typeof rate !== 'number' || !(rate > 0) || rate > 10_000)) {
      throw new HttpError(400, 'ratePerSecond must be a number above 0 and at most 10000');
    }
    const tooSlow = typeof rate === 'number' ? rateProblem(rate, `ratePerSecond ${rate}`) : undefined;
    if (tooSlow !== undefined) throw new HttpError(400, tooSlow);
    const ratePerSecond = typeof rate === 'number' ? rate : undefined;
    const parked = includeParked(body);
    const { services, connection, lookup, clock, log } = this.#options;
    const id = randomUUID();
    log(
      `replay ${id} by ${displayName(requestedBy)} from ${displayName(dlqId(dlq))} started (${filter.ids?.length ?? 'all matching'} selected${ratePerSecond === undefined ? '' : `, ${ratePerSecond}/s`})`,
    );
    return this.jobs.start(
      { id, dlq: dlqId(dlq), requestedBy, ratePerSecond, total: filter.ids?.length },
      async (onEntry, signal) => {
        const summary = await replayFromDlq(
          {
            transport: dlq.transport,
            from: dlq.name,
            group: dlq.group,
            filter,
            ratePerSecond,
            dryRun: false,
            includeParked: parked,
            replayId: id,
            requestedBy,
          },
          { services, connection, inbox: lookup, clock, signal, onEntry },
        );
        log(
          `replay ${id} by ${displayName(requestedBy)}: replayed ${summary.replayed}, failed ${summary.failed}, unreplayable ${summary.unreplayable}, stopped because ${summary.stoppedBecause}`,
        );
        return summary;
      },
    );
  }
}
