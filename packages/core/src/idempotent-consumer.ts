// idempotentConsumer(): turns one delivery into one outcome. It checks and decodes the message, claims its id in
// the inbox, runs the handler inside the claim's transaction (or under a lease), records failures durably and
// reports. It never acks anything and never rejects: the transport maps the outcome to the broker's action.

import { performance } from 'node:perf_hooks';
import { context, type Tracer } from '@opentelemetry/api';
import { backoffDelayMs } from './backoff.js';
import { classifyError, contentRejection } from './classify-error.js';
import { resolveConsumerConfig, type ResolvedConsumerConfig } from './consumer-config.js';
import { ConsumerMetrics } from './consumer-metrics.js';
import type { IdempotentConsumer, IdempotentConsumerConfig, Logger, OutcomeEvent } from './consumer-types.js';
import { HandlerRun } from './handler-run.js';
import { decodeJsonBody, validatePayload } from './decode-payload.js';
import { withAttemptLedger } from './delivery/attempt-ledger.js';
import { toErrorInfo } from './error-info.js';
import {
  findTransactionControl,
  DecodeError,
  HandlerTimeoutError,
  InvalidMessageIdError,
  isInboxkitError,
  LeaseLostError,
  StoreUnavailableError,
} from './errors.js';
import { FastPathAuthority } from './fast-path-authority.js';
import { FastPathGuard } from './fast-path-guard.js';
import { fingerprintJson, fingerprintPayload } from './fingerprint.js';
import { checkFingerprintResolver, FingerprintError, type CheckedFingerprintResolver } from './fingerprint-resolver.js';
import type { FingerprintInput } from './consumer-types.js';
import { guardedLogger } from './guarded-logger.js';
import { cloudEventsTime, intentTimeOf } from './intent-time.js';
import type { DecodedMessage, InboundMessage } from './message.js';
import { checkMessageId } from './message-id.js';
import type { DeadLetterReason, ErrorInfo, Outcome, RetryReason } from './outcome.js';
import { recordableDate } from './recordable.js';
import { silentLogger } from './silent-logger.js';
import { compileStatements, statementBuilderOf, type StatementBuilder } from './statement-handler.js';
import { deliveryContext, endDeliverySpan, inboxkitTracer, startDeliverySpan, tracingIsIdle, withHandlerSpan } from './trace-context.js';
import type {
  BatchRun,
  ClaimedDelivery,
  TransactionalRun,
  ClaimEffect,
  ClaimRequest,
  ClaimSettings,
  FailureRecord,
  FailureWrite,
  InboxRow,
  InboxRowState,
  InboxStore,
  UnclaimedResult,
} from './store.js';

/**
 * Most messages one batch transaction handles. Each message gets a savepoint, and a Postgres backend caches
 * only 64 subtransaction ids before every snapshot in the cluster slows down; larger batches are split.
 */
export const MAX_BATCH_TRANSACTION_SIZE = 50;

/** The longest retry delay recorded (about 24.8 days, the longest a Node timer waits); longer requests are cut. */
export const MAX_RETRY_DELAY_MS = 2_147_483_647;

/** A delivery that passed the id, decode and schema checks. */
interface Prepared<P> {
  readonly message: InboundMessage;
  readonly id: string;
  readonly decoded: DecodedMessage<P>;
  readonly request: ClaimRequest;
}

/** A delivery dead-lettered before its claim; recorded in the inbox when it has a usable id. */
interface Rejected {
  readonly rejected: Outcome;
  readonly id: string | undefined;
  readonly fingerprint: string | null;
  readonly timestamp: Date | undefined;
  /** The intent's time the record's day comes from (`ClaimRequest.intentTime`), when known. */
  readonly intentTime?: Date;
}

/** What to record for a failed attempt, and why. */
interface FailureDecision {
  readonly record: FailureRecord;
  readonly deadLetterReason: DeadLetterReason | undefined;
}

/**
 * Creates the consumer a transport drives. Validates `config` at once (a `ConfigurationError` says what to
 * change); `handle` then resolves every delivery to `processed`, `duplicate`, `retry {delayMs}` or
 * `dead-letter {reason}` and never rejects.
 *
 * @example
 * const consumer = idempotentConsumer({
 *   name: 'billing',
 *   store: new PostgresInboxStore({ db }),
 *   schema: z.object({ orderId: z.string(), amount: z.number() }),
 *   handler: async (message, { tx }) => {
 *     await tx.insertInto('charges').values(message.payload).execute();
 *   },
 * });
 * const outcome = await consumer.handle(delivery);
 */
export function idempotentConsumer<P = unknown, Tx = unknown>(
  config: IdempotentConsumerConfig<P, Tx>,
): IdempotentConsumer<P, Tx> {
  return new InboxConsumer(resolveConsumerConfig(config));
}

/**
 * The late rule decides on the store's clock (`InboxStore.now`), the one expiry and pruning use. Deliveries whose
 * age on the application's clock, corrected by the last measured offset, is within this margin of the window
 * (or beyond it) ask the store for its time; the offset is measured again at most this often.
 */
const LATE_CHECK_MARGIN_MS = 5 * 60_000;
const CLOCK_OFFSET_REFRESH_MS = 10 * 60_000;

class InboxConsumer<P, Tx> implements IdempotentConsumer<P, Tx> {
  readonly name: string;
  readonly config: ResolvedConsumerConfig<P, Tx>;
  readonly #store: InboxStore<Tx>;
  readonly #settings: ClaimSettings;
  readonly #metrics: ConsumerMetrics;
  readonly #tracer: Tracer;
  /** The application's logger behind a guard: core's own log calls never throw (guarded-logger.ts). */
  readonly #logger: Logger;
  /** The application's logger as given, for `context.logger`. */
  readonly #handlerLogger: Logger;
  /** The custom `decode`; `undefined` for the default JSON decoder, whose text is fingerprinted. */
  readonly #decode: ((body: Uint8Array | string | null) => unknown) | undefined;
  readonly #consumerBytes: number;
  /** The `fingerprint` option's projection; `undefined` fingerprints the whole payload. */
  readonly #fingerprint: CheckedFingerprintResolver<FingerprintInput> | undefined;
  /** The builder of a statement handler (`statementHandler`), whose statements may go with the claim. */
  readonly #buildStatements: StatementBuilder<P> | undefined;
  /** The cache of completed deliveries in front of the inbox (`fastPath`), if any. */
  readonly #fastPath: FastPathGuard | undefined;
  /** The fast path's scope: this consumer's name inside its inbox's identity (`InboxStore#identity`). */
  readonly #fastPathAuthority: FastPathAuthority | undefined;
  /** The store's clock minus the application's, in ms, as last measured; when it was measured (0: never). */
  #clockOffsetMs = 0;
  #clockMeasuredAt = 0;

  constructor(config: ResolvedConsumerConfig<P, Tx>) {
    this.config = config;
    this.name = config.name;
    this.#store = config.store;
    this.#settings = Object.freeze({
      consumer: config.name,
      maxAttempts: config.maxAttempts,
      dedupeWindowMs: config.dedupeWindowMs,
      lockTimeoutMs: config.lockTimeoutMs,
    });
    this.#metrics = new ConsumerMetrics(config.name, config.meterProvider);
    this.#tracer = inboxkitTracer(config.tracerProvider);
    this.#handlerLogger = config.logger ?? silentLogger;
    this.#logger = guardedLogger(this.#handlerLogger);
    this.#decode = config.decode;
    this.#fingerprint = checkFingerprintResolver(config.fingerprint, 'fingerprint');
    this.#consumerBytes = Buffer.byteLength(config.name, 'utf8');
    this.#buildStatements = config.mode === 'transactional' ? statementBuilderOf<P>(config.handler) : undefined;
    this.#fastPath =
      config.fastPath === undefined
        ? undefined
        : new FastPathGuard(config.fastPath, { logger: this.#logger, label: `${config.name}: fast path` });
    this.#fastPathAuthority =
      config.fastPath === undefined
        ? undefined
        : new FastPathAuthority(
            config.store.identity === undefined ? undefined : () => config.store.identity!(),
            config.name,
            { logger: this.#logger, label: `${config.name}: fast path` },
          );
    // The delivery kit's reach into the inbox (delivery/attempt-ledger.ts), kept off the consumer's interface.
    withAttemptLedger(this, {
      recordAttemptsStarted: (messages) => this.#recordAttemptsStarted(messages),
      crashSuspects: (messages) => this.#crashSuspects(messages),
    });
  }

  async handle(message: InboundMessage): Promise<Outcome> {
    let outcome: Outcome;
    if (tracingIsIdle(this.config.tracerProvider)) {
      // Nothing records or carries a trace: no span, and the delivery's context is the active one.
      outcome = await this.#guarded(message, () => this.#handleOne(message));
    } else {
      const span = startDeliverySpan(this.#tracer, this.name, message);
      outcome = await context.with(deliveryContext(message), () => this.#guarded(message, () => this.#handleOne(message)));
      endDeliverySpan(span, outcome);
    }
    const reported = this.#report(message, outcome);
    if (reported !== undefined) await reported;
    return outcome;
  }

  async handleBatch(messages: readonly InboundMessage[]): Promise<Outcome[]> {
    if (this.config.mode === 'leased' || messages.length <= 1) {
      const outcomes: Outcome[] = [];
      for (const message of messages) outcomes.push(await this.handle(message));
      return outcomes;
    }
    const spans = messages.map((message) => startDeliverySpan(this.#tracer, this.name, message));
    const outcomes = await this.#handleBatch(messages);
    for (let i = 0; i < messages.length; i++) {
      endDeliverySpan(spans[i]!, outcomes[i]!);
      const reported = this.#report(messages[i]!, outcomes[i]!);
      if (reported !== undefined) await reported;
    }
    return outcomes;
  }

  /** `AttemptLedger#recordAttemptsStarted`. */
  async #recordAttemptsStarted(messages: readonly InboundMessage[]): Promise<void> {
    const ids = new Map<string, Date | undefined>();
    for (const m of messages) {
      if (checkMessageId(m.id, this.config.maxMessageIdLength, this.#consumerBytes) === undefined && !ids.has(m.id!)) {
        // The claim may take the day from the payload (dayOf), not decoded here; the cross-day check finds it.
        ids.set(m.id!, cloudEventsTime(m.headers) ?? validDate(m.timestamp));
      }
    }
    if (ids.size === 0) return;
    try {
      await this.#store.recordAttemptsStarted(this.#settings, [...ids.keys()], [...ids.values()]);
    } catch (error) {
      // handle() will meet the same store and answer `retry`; nothing is acked on this path.
      this.#logger.warn({ consumer: this.name, err: error }, 'inboxkit: could not record attempts as started');
    }
  }

  /** `AttemptLedger#crashSuspects`. */
  async #crashSuspects(messages: readonly InboundMessage[]): Promise<ReadonlyMap<string, number>> {
    const suspects = new Map<string, number>();
    for (const m of messages) {
      if (checkMessageId(m.id, this.config.maxMessageIdLength, this.#consumerBytes) === undefined) suspects.set(m.id!, 0);
    }
    if (suspects.size === 0) return suspects;
    let rows: InboxRow[];
    try {
      rows = await this.#store.findRows(this.name, [...suspects.keys()]);
    } catch (error) {
      // Unknown: every one may have crashed. The claim meets the same store and waits for it.
      this.#logger.warn({ consumer: this.name, err: error }, 'inboxkit: could not read the rows of redelivered messages');
      return suspects;
    }
    for (const row of rows) {
      // The last attempt ended on record: completed, dead-lettered, or a failure whose retry this is.
      const ended = row.status === 'completed' || row.status === 'dead_lettered' || (row.status === 'failed' && row.startedAttempts <= row.attempts);
      if (ended) suspects.delete(row.messageId);
      else suspects.set(row.messageId, Math.max(row.attempts, row.startedAttempts));
    }
    return suspects;
  }

  // ── one delivery ────────────────────────────────────────────────────────────────────────────────────────

  async #handleOne(message: InboundMessage): Promise<Outcome> {
    const started = performance.now();
    const checked = this.#prepare(message);
    const prepared = checked instanceof Promise ? await checked : checked;
    if (!('request' in prepared)) return this.#recordRejection(prepared);
    // (Each check awaited only when it can apply: no fast path, or no timestamp, costs no await.)
    if (this.#fastPath !== undefined && (await this.#fastPathHit(prepared))) return this.#fastPathDuplicate(prepared);
    if (prepared.request.messageTimestamp !== undefined && (await this.#mayBeLate(prepared))) {
      const late = await this.#lateOutcome(prepared);
      if (late !== undefined) return this.#recordRejection(late);
    }
    return this.config.mode === 'leased' ? this.#runLeased(prepared, started) : this.#runTransactional(prepared, started);
  }

  async #runTransactional(prepared: Prepared<P>, started: number): Promise<Outcome> {
    let ran: ClaimedDelivery | undefined;
    let run: TransactionalRun<void>;
    try {
      run = await this.#store.runTransactional(
        this.#settings,
        prepared.request,
        (tx, claimed) => {
          ran = claimed;
          return this.#runHandler(prepared, tx, claimed);
        },
        this.#effectOf(prepared),
      );
    } catch (error) {
      // The claim's transaction failed after the handler ran (its connection was lost: terminated, an idle
      // timeout, a restart). Count the attempt if the store can record it; in an outage it cannot, so this
      // rejects, the answer is retry (store-unavailable) and no attempt is burned.
      if (ran === undefined) throw error;
      return this.#recordFailure(prepared, ran, error, true);
    }
    switch (run.kind) {
      case 'completed':
        this.#remember(prepared);
        return { status: 'processed', messageId: prepared.id, attempt: run.claimed.attempt, durationMs: elapsed(started) };
      case 'failed':
        return this.#recordFailure(prepared, run.claimed, run.error);
      default:
        return this.#unclaimed(prepared, run);
    }
  }

  async #runLeased(prepared: Prepared<P>, started: number): Promise<Outcome> {
    const claim = await this.#store.claimLease({ ...this.#settings, leaseMs: this.config.leaseMs }, prepared.request);
    if (claim.kind !== 'claimed') return this.#unclaimed(prepared, claim);
    const claimed = claim.claimed;
    if (claimed.from === 'lease-expired') this.#metrics.leaseTakeover();
    const run = await this.#store.completeLease(this.#settings, claimed, (tx) => this.#runHandler(prepared, tx, claimed));
    switch (run.kind) {
      case 'completed':
        this.#remember(prepared);
        return { status: 'processed', messageId: prepared.id, attempt: claimed.attempt, durationMs: elapsed(started) };
      case 'lease-lost':
        return this.#retry(prepared.id, 0, claimed.attempt, 'lease-lost', toErrorInfo(new LeaseLostError('the lease was taken over before completion')));
      case 'failed':
        return this.#recordFailure(prepared, claimed, run.error);
    }
  }

  /** A statement handler's statements for this delivery, built when the store asks (after the claim). */
  #effectOf(prepared: Prepared<P>): ClaimEffect | undefined {
    const build = this.#buildStatements;
    if (build === undefined) return undefined;
    return { statements: () => compileStatements(build(prepared.decoded)) };
  }

  /** Runs the handler with its context; the timeout aborts the signal and, if the handler gives up, fails it. */
  async #runHandler(prepared: Prepared<P>, tx: Tx, claimed: ClaimedDelivery): Promise<void> {
    const run = new HandlerRun<Tx>({
      tx,
      attempt: claimed.attempt,
      consumer: this.name,
      messageId: prepared.id,
      isReplay: prepared.message.replay !== undefined,
      logger: this.#handlerLogger,
      timeoutMs: this.config.handlerTimeoutMs,
      outbox: this.config.outbox,
    });
    try {
      if (tracingIsIdle(this.config.tracerProvider)) await this.config.handler(prepared.decoded, run);
      else await withHandlerSpan(this.#tracer, this.name, prepared.message, claimed.attempt, () => this.config.handler(prepared.decoded, run));
      this.#metrics.handlerDuration(run.elapsedMs, true);
    } catch (error) {
      this.#metrics.handlerDuration(run.elapsedMs, false);
      if (run.timedOut && !isInboxkitError(error)) {
        throw new HandlerTimeoutError(`the handler failed after its timeout (${this.config.handlerTimeoutMs} ms): ${toErrorInfo(error).message}`, {
          cause: error,
        });
      }
      throw error;
    } finally {
      run.finish();
    }
  }

  // ── checks before the inbox ─────────────────────────────────────────────────────────────────────────────

  /** The checks before the inbox; synchronous unless a schema validates asynchronously. */
  #prepare(message: InboundMessage): Prepared<P> | Rejected | Promise<Prepared<P> | Rejected> {
    const timestamp = validDate(message.timestamp);
    const intentTime = cloudEventsTime(message.headers);
    const problem = checkMessageId(message.id, this.config.maxMessageIdLength, this.#consumerBytes);
    if (problem !== undefined) {
      const id = problem.problem === 'missing-id' ? undefined : typeof message.id === 'string' ? message.id : undefined;
      const rejected = this.#deadLetter(id, problem.problem, 0, toErrorInfo(new InvalidMessageIdError(problem.detail)));
      // An unusable id cannot key an inbox row: nothing to record.
      return { rejected, id: undefined, fingerprint: null, timestamp };
    }
    const id = message.id!;
    let raw: unknown;
    let text: string | undefined;
    try {
      if (this.#decode === undefined) ({ text, value: raw } = decodeJsonBody(message.body));
      else raw = this.#decode(message.body);
    } catch (error) {
      const decodeError =
        error instanceof DecodeError
          ? error
          : new DecodeError(`the body could not be decoded: ${toErrorInfo(error).message}`, { cause: error });
      return { rejected: this.#deadLetter(id, 'undecodable', 0, toErrorInfo(decodeError)), id, fingerprint: null, timestamp, intentTime };
    }
    let fingerprint: string;
    try {
      fingerprint =
        this.#fingerprint !== undefined
          ? fingerprintPayload(this.#fingerprint.project({ id, payload: raw, headers: message.headers ?? {} }, raw))
          : text === undefined
            ? fingerprintPayload(raw)
            : fingerprintJson(text, raw);
    } catch (error) {
      if (this.#fingerprint !== undefined) {
        // The user's resolver (or what it answered): a permanent fault of this message, never a retry loop.
        const failed = new FingerprintError(`the fingerprint option could not fingerprint the message: ${toErrorInfo(error).message}`, {
          cause: error,
        });
        return { rejected: this.#deadLetter(id, 'fingerprint-failed', 0, toErrorInfo(failed)), id, fingerprint: null, timestamp, intentTime };
      }
      const info = toErrorInfo(new DecodeError(`the payload cannot be fingerprinted: ${toErrorInfo(error).message}`, { cause: error }));
      return { rejected: this.#deadLetter(id, 'undecodable', 0, info), id, fingerprint: null, timestamp, intentTime };
    }
    if (this.config.schema === undefined) return this.#prepared(message, id, raw as P, fingerprint, timestamp);
    return validatePayload(this.config.schema, raw).then(
      (payload) => this.#prepared(message, id, payload, fingerprint, timestamp),
      (error: unknown): Rejected => ({
        rejected: this.#deadLetter(id, 'schema-invalid', 0, toErrorInfo(error)),
        id,
        fingerprint,
        timestamp,
        intentTime,
      }),
    );
  }

  #prepared(message: InboundMessage, id: string, payload: P, fingerprint: string, timestamp: Date | undefined): Prepared<P> | Rejected {
    const deliveryCount = message.deliveryCount;
    const count = typeof deliveryCount === 'number' && Number.isSafeInteger(deliveryCount) && deliveryCount > 0 ? deliveryCount : 0;
    const decoded: DecodedMessage<P> = {
      id,
      payload,
      headers: message.headers,
      timestamp: message.timestamp,
      source: message.source,
      replay: message.replay,
    };
    let intentTime: Date | undefined;
    try {
      intentTime = intentTimeOf(decoded, this.config.dayOf);
    } catch (error) {
      const rejected = this.#deadLetter(id, 'schema-invalid', 0, toErrorInfo(error));
      return { rejected, id, fingerprint, timestamp, intentTime: cloudEventsTime(message.headers) };
    }
    return {
      message,
      id,
      decoded,
      request: {
        messageId: id,
        fingerprint,
        messageTimestamp: timestamp,
        ...(intentTime === undefined ? {} : { intentTime }),
        deliveryCount: count,
        replayId: message.replay?.replayId,
      },
    };
  }

  /** DESIGN §5: no row and older than the window → its id may have been pruned; apply `latePolicy`. */
  async #lateOutcome(prepared: Prepared<P>): Promise<Rejected | undefined> {
    if (!this.#isLate(prepared, await this.#storeNow())) return undefined;
    const rows = await this.#store.findRows(this.name, [prepared.id]);
    if (rows.length > 0) return undefined;
    return this.#lateVerdict(prepared);
  }

  /**
   * Records a delivery dead-lettered before its claim as a `dead_lettered` row (attempt 0), so operators see it
   * in the inbox and an explicit replay can reopen it — a late message especially, whose replay would otherwise
   * meet the late rule again. The row is written before the transport dead-letters: when the store cannot take
   * it, the answer is `retry` (store-unavailable), so the redelivery records it once the store is back. A
   * dead letter therefore always has its inbox row, and a replay of it always finds one.
   */
  async #recordRejection(rejection: Rejected): Promise<Outcome> {
    const outcome = rejection.rejected;
    if (rejection.id === undefined || outcome.status !== 'dead-letter') return outcome;
    try {
      // A record refused even in its minimal form leaves the dead letter without a row (logged): rare, bounded.
      await this.#writeFailure({
        messageId: rejection.id,
        fingerprint: rejection.fingerprint,
        messageTimestamp: rejection.timestamp,
        ...(rejection.intentTime === undefined ? {} : { intentTime: rejection.intentTime }),
        attempt: 0,
        error: outcome.error ?? { name: 'Rejected', message: outcome.reason },
        deadLetterReason: outcome.reason,
        retryDelayMs: 0,
        leaseToken: null,
        reopenedBy: undefined,
      });
    } catch (error) {
      return this.#storeUnavailable(rejection.id, error);
    }
    return outcome;
  }

  /** True when the message is older than the window at `now`, on the store's clock. */
  #isLate(prepared: Prepared<P>, now: number): boolean {
    const ts = prepared.request.messageTimestamp;
    return ts !== undefined && now - ts.getTime() > this.config.dedupeWindowMs;
  }

  /**
   * The cheap test before the exact one: older than the window less a margin, on the application's clock
   * corrected by the store's measured offset (measured first, and again every 10 minutes, when the delivery has
   * a timestamp). Only deliveries that pass ask the store for its time.
   */
  async #mayBeLate(prepared: Prepared<P>): Promise<boolean> {
    const ts = prepared.request.messageTimestamp;
    if (ts === undefined) return false;
    if (this.#store.now !== undefined && Date.now() - this.#clockMeasuredAt > CLOCK_OFFSET_REFRESH_MS) {
      // A store that cannot answer now will not take the claim either; keep the last offset meanwhile.
      await this.#storeNow().catch(() => undefined);
    }
    return Date.now() + this.#clockOffsetMs - ts.getTime() > this.config.dedupeWindowMs - LATE_CHECK_MARGIN_MS;
  }

  /** The store's clock now (`InboxStore.now`), in epoch ms; the application's for a store without one. */
  async #storeNow(): Promise<number> {
    if (this.#store.now === undefined) return Date.now();
    const before = Date.now();
    const now = (await this.#store.now()).getTime();
    const after = Date.now();
    this.#clockOffsetMs = now - (before + after) / 2;
    this.#clockMeasuredAt = after;
    return now;
  }

  #lateVerdict(prepared: Prepared<P>): Rejected | undefined {
    this.#metrics.late(this.config.latePolicy);
    this.#logger.warn(
      { consumer: this.name, messageId: prepared.id, timestamp: prepared.request.messageTimestamp, policy: this.config.latePolicy },
      'inboxkit: message older than the dedupe window with no inbox row',
    );
    if (this.config.latePolicy === 'process') return undefined;
    const rejected = this.#deadLetter(prepared.id, 'beyond-dedupe-window', 0, {
      name: 'LateMessage',
      message: `the message timestamp ${prepared.request.messageTimestamp!.toISOString()} is older than the dedupe window (${this.config.dedupeWindowMs} ms) and its id has no inbox row: it cannot be deduplicated honestly`,
    });
    const { fingerprint, messageTimestamp: timestamp, intentTime } = prepared.request;
    return { rejected, id: prepared.id, fingerprint, timestamp, ...(intentTime === undefined ? {} : { intentTime }) };
  }

  // ── outcomes from the store's answers ───────────────────────────────────────────────────────────────────

  #unclaimed(prepared: Prepared<P>, result: UnclaimedResult): Outcome {
    switch (result.kind) {
      case 'busy':
        return result.reason === 'lock-timeout'
          ? this.#retry(prepared.id, Math.max(this.config.backoff.initialDelayMs, 1), 0, 'lock-timeout')
          : this.#retry(prepared.id, 0, 0, 'contended');
      case 'exhausted':
        return this.#deadLetterFromRow(prepared.id, 'max-attempts', result.row);
      case 'not-claimed':
        return this.#fromRowState(prepared, result.row);
      case 'duplicate':
        this.#remember(prepared);
        return { status: 'duplicate', messageId: prepared.id, reason: prepared.message.replay ? 'replay-of-completed' : 'completed' };
    }
  }

  #fromRowState(prepared: Prepared<P>, row: InboxRowState | undefined): Outcome {
    if (row === undefined) return this.#retry(prepared.id, 0, 0, 'contended');
    if (row.fingerprint !== null && row.fingerprint !== prepared.request.fingerprint) {
      this.#metrics.payloadMismatch();
      return this.#deadLetter(prepared.id, 'payload-mismatch', 0, {
        name: 'PayloadMismatch',
        message: `message id ${JSON.stringify(prepared.id)} was first recorded with another payload (fingerprint ${row.fingerprint.slice(0, 12)}…, this delivery ${prepared.request.fingerprint.slice(0, 12)}…): not processed`,
      });
    }
    switch (row.status) {
      case 'completed':
        this.#remember(prepared);
        return { status: 'duplicate', messageId: prepared.id, reason: prepared.message.replay ? 'replay-of-completed' : 'completed' };
      case 'dead_lettered':
        return this.#deadLetterFromRow(prepared.id, row.deadLetterReason ?? 'max-attempts', row);
      case 'discarded':
      case 'archived':
        // An operator retired this dead letter: its effect never ran and must not run behind their back. The
        // delivery is acked as a duplicate and counted under the act's name (DESIGN §6: only a replay reopens).
        return { status: 'duplicate', messageId: prepared.id, reason: row.status };
      case 'failed':
        return row.availableInMs > 0
          ? this.#retry(prepared.id, row.availableInMs, 0, 'handler-error', row.lastError ?? undefined)
          : this.#retry(prepared.id, 0, 0, 'contended');
      case 'processing':
        return row.leaseRemainingMs > 0
          ? this.#retry(prepared.id, row.leaseRemainingMs, 0, 'lease-held')
          : this.#retry(prepared.id, 0, 0, 'contended');
    }
  }

  /**
   * What to record for a failed attempt. `lost`: the attempt's transaction failed with its connection, not by
   * the handler's throw; the built-in classification decides (`isRetriable` is for the handler's errors, and
   * must not dead-letter a message because the database restarted under it).
   */
  #failureDecision(prepared: Prepared<P>, claimed: ClaimedDelivery, error: unknown, lost = false): FailureDecision {
    const verdict = classifyError(error, lost ? undefined : this.config.isRetriable);
    if (verdict.classifierError !== undefined) {
      this.#logger.error(
        { consumer: this.name, messageId: prepared.id, err: verdict.classifierError },
        'inboxkit: isRetriable threw; the built-in classification decided instead',
      );
    }
    // A handler that ended its own transaction is a programmer error whose effect may have committed in part:
    // never retried (isRetriable does not apply), dead-lettered for an operator.
    const deadLetterReason: DeadLetterReason | undefined = findTransactionControl(error) !== undefined
      ? 'transaction-control'
      : !verdict.retriable
      ? 'permanent-error'
      : claimed.attempt >= this.config.maxAttempts
        ? 'max-attempts'
        : undefined;
    return {
      deadLetterReason,
      record: {
        messageId: prepared.id,
        fingerprint: prepared.request.fingerprint,
        messageTimestamp: prepared.request.messageTimestamp,
        ...(prepared.request.intentTime === undefined ? {} : { intentTime: prepared.request.intentTime }),
        attempt: claimed.attempt,
        error: toErrorInfo(error),
        deadLetterReason,
        retryDelayMs: Math.min(verdict.delayMs ?? backoffDelayMs(this.config.backoff, claimed.attempt), MAX_RETRY_DELAY_MS),
        leaseToken: claimed.leaseToken,
        reopenedBy: claimed.from === 'dead_lettered' && claimed.leaseToken === null ? prepared.request.replayId : undefined,
      },
    };
  }

  async #recordFailure(prepared: Prepared<P>, claimed: ClaimedDelivery, error: unknown, lost = false): Promise<Outcome> {
    const decision = this.#failureDecision(prepared, claimed, error, lost);
    this.#logger.info(
      { consumer: this.name, messageId: prepared.id, attempt: claimed.attempt, err: error },
      lost ? "inboxkit: the handler's transaction lost its connection" : 'inboxkit: handler failed',
    );
    const write = await this.#writeFailure(decision.record);
    if (write === undefined) {
      // Nothing about this message can be recorded: dead-letter it now rather than run it forever uncounted.
      // Its effect rolled back with the attempt, so the DLQ copy is all there is: nothing is lost.
      return this.#deadLetter(prepared.id, 'unrecordable', claimed.attempt, decision.record.error);
    }
    return this.#failureOutcome(prepared, claimed, decision, write);
  }

  /**
   * Writes a failure record. When the store refuses it for its content (`contentRejection`: Postgres class 22
   * or 54), writes a minimal record instead — ASCII error text — so the attempt still
   * counts; `undefined` when even that is refused. Any other failure (an outage) rejects: the caller answers
   * retry (store-unavailable) and no attempt is burned.
   */
  async #writeFailure(record: FailureRecord): Promise<FailureWrite | undefined> {
    try {
      return await this.#store.recordFailure(this.#settings, record);
    } catch (error) {
      const refused = contentRejection(error);
      if (refused === undefined) throw error;
      this.#logger.error(
        { consumer: this.name, messageId: record.messageId, err: error },
        'inboxkit: the inbox refused the failure record for its content; recording a minimal one',
      );
      try {
        return await this.#store.recordFailure(this.#settings, minimalFailure(record, refused));
      } catch (again) {
        if (contentRejection(again) === undefined) throw again;
        this.#logger.error(
          { consumer: this.name, messageId: record.messageId, err: again },
          'inboxkit: the inbox refused even a minimal failure record: dead-lettering without an inbox row',
        );
        return undefined;
      }
    }
  }

  #failureOutcome(prepared: Prepared<P>, claimed: ClaimedDelivery, decision: FailureDecision, write: FailureWrite): Outcome {
    const { record } = decision;
    if (!write.recorded) {
      // Someone else finished the row meanwhile (or took our lease): report what the row says now.
      const row = write.row;
      if (claimed.leaseToken !== null && (row === undefined || row.status !== 'completed')) {
        return this.#retry(prepared.id, 0, claimed.attempt, 'lease-lost', record.error);
      }
      // A handler that committed its transaction early left the row completed: not a duplicate, a dead letter.
      if (row?.status === 'completed' && decision.deadLetterReason === 'transaction-control') {
        return this.#deadLetter(prepared.id, 'transaction-control', claimed.attempt, record.error);
      }
      if (row?.status === 'completed') return { status: 'duplicate', messageId: prepared.id, reason: 'completed' };
      if (row?.status === 'dead_lettered') return this.#deadLetterFromRow(prepared.id, row.deadLetterReason ?? 'max-attempts', row);
      return this.#retry(prepared.id, 0, claimed.attempt, 'contended', record.error);
    }
    if (decision.deadLetterReason !== undefined) {
      return this.#deadLetter(prepared.id, decision.deadLetterReason, claimed.attempt, record.error, write.row);
    }
    return this.#retry(prepared.id, record.retryDelayMs, claimed.attempt, 'handler-error', record.error);
  }

  // ── batches ─────────────────────────────────────────────────────────────────────────────────────────────

  async #handleBatch(messages: readonly InboundMessage[]): Promise<Outcome[]> {
    const started = performance.now();
    const outcomes: (Outcome | undefined)[] = new Array<Outcome | undefined>(messages.length).fill(undefined);
    const batch: { index: number; prepared: Prepared<P> }[] = [];
    const repeats: { index: number; prepared: Prepared<P>; first: { index: number; prepared: Prepared<P> } }[] = [];
    const firsts = new Map<string, { index: number; prepared: Prepared<P> }>();
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i]!;
      const result = await this.#guarded(message, async () => this.#prepare(message));
      if (!('request' in result)) outcomes[i] = 'rejected' in result ? await this.#recordRejection(result) : result;
      else {
        const first = firsts.get(result.id);
        if (first !== undefined) repeats.push({ index: i, prepared: result, first });
        else {
          const item = { index: i, prepared: result };
          firsts.set(result.id, item);
          batch.push(item);
        }
      }
    }
    await Promise.all(
      batch.map(async (item) => {
        if (await this.#fastPathHit(item.prepared)) outcomes[item.index] = this.#fastPathDuplicate(item.prepared);
      }),
    );
    await this.#applyLatePolicy(batch, outcomes);
    const pending = batch.filter((item) => outcomes[item.index] === undefined);
    for (let from = 0; from < pending.length; from += MAX_BATCH_TRANSACTION_SIZE) {
      const chunk = pending.slice(from, from + MAX_BATCH_TRANSACTION_SIZE);
      const results = await this.#runChunk(chunk, started);
      chunk.forEach((item, k) => (outcomes[item.index] = results[k]));
    }
    // A repeated id in one batch is a later delivery of the same message, decided once the first is durable: by
    // the batch's own claim when the first is completed and the payload is the same (a duplicate), else anew.
    for (const { index, prepared, first } of repeats) {
      const settled = outcomes[first.index]?.status;
      outcomes[index] =
        (settled === 'processed' || settled === 'duplicate') && prepared.request.fingerprint === first.prepared.request.fingerprint
          ? { status: 'duplicate', messageId: prepared.id, reason: prepared.message.replay ? 'replay-of-completed' : 'completed' }
          : await this.#guarded(prepared.message, () => this.#handleOne(prepared.message));
    }
    return outcomes.map((o, i) => o ?? this.#retry(messages[i]!.id ?? '', 0, 0, 'contended'));
  }

  async #applyLatePolicy(batch: readonly { index: number; prepared: Prepared<P> }[], outcomes: (Outcome | undefined)[]): Promise<void> {
    const maybe: { index: number; prepared: Prepared<P> }[] = [];
    for (const item of batch) if (outcomes[item.index] === undefined && (await this.#mayBeLate(item.prepared))) maybe.push(item);
    if (maybe.length === 0) return;
    let known: Set<string>;
    let late: { index: number; prepared: Prepared<P> }[];
    try {
      const now = await this.#storeNow();
      late = maybe.filter((item) => this.#isLate(item.prepared, now));
      if (late.length === 0) return;
      known = new Set((await this.#store.findRows(this.name, late.map((item) => item.prepared.id))).map((r) => r.messageId));
    } catch (error) {
      for (const item of maybe) outcomes[item.index] = this.#storeUnavailable(item.prepared.id, error);
      return;
    }
    for (const item of late) {
      if (!known.has(item.prepared.id)) {
        const verdict = this.#lateVerdict(item.prepared);
        if (verdict !== undefined) outcomes[item.index] = await this.#recordRejection(verdict);
      }
    }
  }

  async #runChunk(chunk: readonly { index: number; prepared: Prepared<P> }[], started: number): Promise<Outcome[]> {
    const decisions = new Map<number, FailureDecision>();
    let ran = false;
    let runs: BatchRun[];
    try {
      runs = await this.#store.runTransactionalBatch(
        this.#settings,
        chunk.map((item) => item.prepared.request),
        (tx, claimed, k) => {
          ran = true;
          return this.#runHandler(chunk[k]!.prepared, tx, claimed);
        },
        (claimed, error, k) => {
          const decision = this.#failureDecision(chunk[k]!.prepared, claimed, error);
          decisions.set(k, decision);
          return decision.record;
        },
        this.#buildStatements === undefined ? undefined : chunk.map((item) => this.#effectOf(item.prepared)),
      );
    } catch (error) {
      if (!ran && contentRejection(error) === undefined) return chunk.map((item) => this.#storeUnavailable(item.prepared.id, error));
      // The batch's transaction failed after handlers ran (a lost connection, a refused failure record), or its
      // claim was refused for the content of some message. Which message's fault it was cannot be told inside
      // one transaction, and charging every message would dead-letter healthy ones: one transaction per message
      // now charges only the message whose own transaction fails. Nothing of the batch committed (or all of it
      // did: then each is a duplicate).
      this.#logger.warn({ consumer: this.name, err: error }, "inboxkit: the batch's transaction failed; handling its messages one by one");
      return this.#oneByOne(chunk);
    }
    if (runs.some((run) => run.kind === 'busy')) {
      // The batch claim met a concurrent delivery: fall back to one transaction per message.
      return this.#oneByOne(chunk);
    }
    return runs.map((run, k) => {
      const prepared = chunk[k]!.prepared;
      switch (run.kind) {
        case 'completed':
          this.#remember(prepared);
          return { status: 'processed', messageId: prepared.id, attempt: run.claimed.attempt, durationMs: elapsed(started) };
        case 'failed':
          return this.#failureOutcome(prepared, run.claimed, decisions.get(k)!, run.write);
        default:
          return this.#unclaimed(prepared, run);
      }
    });
  }

  // ── the fast path (a cache of completed deliveries in front of the inbox) ─────────────────────────────

  /** True when the cache knows this id completed with this payload. Replays always go to the inbox. */
  async #fastPathHit(prepared: Prepared<P>): Promise<boolean> {
    if (this.#fastPath === undefined || prepared.message.replay !== undefined) return false;
    const known = this.#fastPathAuthority!.scope();
    const scope = typeof known === 'string' ? known : await known;
    if (scope === undefined) {
      this.#metrics.fastPath('bypassed');
      return false;
    }
    const result = await this.#fastPath.check(scope, prepared.id, prepared.request.fingerprint);
    this.#metrics.fastPath(result);
    return result === 'hit';
  }

  #fastPathDuplicate(prepared: Prepared<P>): Outcome {
    return { status: 'duplicate', messageId: prepared.id, reason: 'completed', source: 'fast-path' };
  }

  /** After the inbox says completed with this payload (committed now, or before): tell the cache, without waiting. */
  #remember(prepared: Prepared<P>): void {
    if (this.#fastPath === undefined) return;
    const fastPath = this.#fastPath;
    const write = (scope: string | undefined): void => {
      if (scope !== undefined) fastPath.remember(scope, prepared.id, prepared.request.fingerprint, this.config.dedupeWindowMs);
    };
    const known = this.#fastPathAuthority!.scope();
    if (typeof known === 'string' || known === undefined) write(known);
    else void known.then(write);
  }

  /**
   * The chunk's messages one transaction each. Once one meets an outage of the store, the rest are answered
   * `retry` (store-unavailable) without trying: nothing more can be decided until the store is back.
   */
  async #oneByOne(chunk: readonly { index: number; prepared: Prepared<P> }[]): Promise<Outcome[]> {
    const outcomes: Outcome[] = [];
    for (const item of chunk) {
      const last = outcomes[outcomes.length - 1];
      if (last?.status === 'retry' && last.reason === 'store-unavailable') {
        outcomes.push(this.#retry(item.prepared.id, last.delayMs, 0, 'store-unavailable', last.error));
        continue;
      }
      outcomes.push(await this.#guarded(item.prepared.message, () => this.#runTransactional(item.prepared, performance.now())));
    }
    return outcomes;
  }

  // ── outcome builders and reporting ──────────────────────────────────────────────────────────────────────

  /**
   * Runs `work`; a store failure (or any unexpected error) becomes `retry` with reason `store-unavailable`. A
   * store that refuses a claim for its content (`contentRejection`) would refuse it on every delivery, and the
   * handler has not run: that delivery is dead-lettered (`unrecordable`) instead of retried forever.
   */
  async #guarded<T>(message: InboundMessage, work: () => Promise<T | Outcome>): Promise<T | Outcome> {
    try {
      return await work();
    } catch (error) {
      if (contentRejection(error) !== undefined) {
        this.#logger.error({ consumer: this.name, messageId: message.id, err: error }, 'inboxkit: the inbox refused this message for its content');
        return this.#deadLetter(message.id, 'unrecordable', 0, toErrorInfo(error));
      }
      return this.#storeUnavailable(message.id ?? '', error);
    }
  }

  #storeUnavailable(messageId: string, error: unknown): Outcome {
    const level = error instanceof StoreUnavailableError || isInboxkitError(error) ? 'warn' : 'error';
    this.#logger[level]({ consumer: this.name, messageId, err: error }, 'inboxkit: inbox store unavailable, message will be retried');
    return this.#retry(messageId, Math.max(this.config.backoff.initialDelayMs, 1), 0, 'store-unavailable', toErrorInfo(error));
  }

  #retry(messageId: string, delayMs: number, attempt: number, reason: RetryReason, error?: ErrorInfo): Outcome {
    return {
      status: 'retry',
      messageId,
      delayMs: Math.max(0, Math.round(delayMs)),
      attempt,
      reason,
      ...(error !== undefined ? { error } : {}),
    };
  }

  #deadLetter(
    messageId: string | undefined,
    reason: DeadLetterReason,
    attempts: number,
    error: ErrorInfo | undefined,
    row?: { readonly firstFailureAt: Date | null; readonly lastFailureAt: Date | null },
  ): Outcome {
    return {
      status: 'dead-letter',
      messageId,
      reason,
      attempts,
      ...(error !== undefined ? { error } : {}),
      ...(row?.firstFailureAt ? { firstFailureAt: row.firstFailureAt } : {}),
      ...(row?.lastFailureAt ? { lastFailureAt: row.lastFailureAt } : {}),
    };
  }

  #deadLetterFromRow(messageId: string, reason: DeadLetterReason, row: InboxRow): Outcome {
    return this.#deadLetter(messageId, reason, row.attempts, row.lastError ?? undefined, row);
  }

  /** Metrics and log line of an outcome; a promise only when there is more to wait for (a replay's audit, a hook). */
  #report(message: InboundMessage, outcome: Outcome): Promise<void> | undefined {
    const m = this.#metrics;
    m.outcome(outcome.status);
    switch (outcome.status) {
      case 'processed':
        this.#logger.debug({ consumer: this.name, messageId: outcome.messageId, attempt: outcome.attempt }, 'inboxkit: processed');
        break;
      case 'duplicate':
        m.duplicate(outcome.reason, outcome.source);
        this.#logger.debug({ consumer: this.name, messageId: outcome.messageId, reason: outcome.reason }, 'inboxkit: duplicate suppressed');
        break;
      case 'retry':
        m.retry(outcome.reason);
        this.#logger.debug(
          { consumer: this.name, messageId: outcome.messageId, reason: outcome.reason, delayMs: outcome.delayMs },
          'inboxkit: retry',
        );
        break;
      case 'dead-letter':
        m.deadLetter(outcome.reason);
        this.#logger.warn(
          { consumer: this.name, messageId: outcome.messageId, reason: outcome.reason, attempts: outcome.attempts, error: outcome.error },
          'inboxkit: dead-letter',
        );
        break;
    }
    const audit = message.replay !== undefined && outcome.messageId !== undefined;
    const hook = this.config.hooks?.onOutcome;
    if (!audit && hook === undefined) return undefined;
    return this.#reportAfter(message, outcome, audit, hook);
  }

  async #reportAfter(message: InboundMessage, outcome: Outcome, audit: boolean, hook: ((event: OutcomeEvent) => void | Promise<void>) | undefined): Promise<void> {
    if (audit) await this.#auditReplay(message, outcome);
    if (hook !== undefined) {
      try {
        await hook({ consumer: this.name, message, outcome });
      } catch (error) {
        this.#logger.warn({ consumer: this.name, err: error }, 'inboxkit: hooks.onOutcome threw; ignored');
      }
    }
  }

  async #auditReplay(message: InboundMessage, outcome: Outcome): Promise<void> {
    const replay = message.replay!;
    const action =
      outcome.status === 'duplicate'
        ? 'skipped-completed'
        : outcome.status === 'dead-letter' && outcome.reason === 'payload-mismatch'
          ? 'refused-payload-mismatch'
          : outcome.status === 'processed' || outcome.status === 'retry' || outcome.status === 'dead-letter'
            ? 'replayed'
            : 'replayed';
    try {
      await this.#store.recordReplay({
        replayId: replay.replayId,
        consumer: this.name,
        messageId: outcome.messageId!,
        requestedBy: replay.requestedBy,
        requestedAt: replay.requestedAt,
        outcome: `${action}:${outcome.status}${outcome.status === 'dead-letter' || outcome.status === 'retry' ? `:${outcome.reason}` : ''}`,
      });
    } catch (error) {
      this.#logger.warn({ consumer: this.name, err: error }, 'inboxkit: could not write the replay audit line');
    }
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 1000) / 1000;
}

/** A usable producer timestamp: a valid Date, clamped to what stores record (years 1–9999, recordable.ts). */
function validDate(value: unknown): Date | undefined {
  return recordableDate(value);
}

/**
 * The record written when the store refused `record` for its content (`code`, a SQLSTATE): the same attempt,
 * reason and delay, with only ASCII error text. The message timestamp stays (it was made recordable by
 * `validDate`): a store partitioned by day finds the row by it.
 */
function minimalFailure(record: FailureRecord, code: string): FailureRecord {
  const ascii = (text: string): string => text.replaceAll(/[^\x20-\x7e]/g, '?').slice(0, 200);
  return {
    ...record,
    error: {
      name: 'UnrecordableFailure',
      message: `the inbox refused to record this failure as it was (SQLSTATE ${ascii(code)}); the error was a ${ascii(record.error.name)}`,
    },
  };
}
