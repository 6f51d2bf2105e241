// The public contract of idempotentConsumer(): its configuration, the handler's context, and the consumer
// object transports drive. The implementation lives in idempotent-consumer.ts.

import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import type { FastPath } from './fast-path.js';
import type { FingerprintResolver } from './fingerprint-resolver.js';
import type { DecodedMessage, InboundMessage } from './message.js';
import type { DeadLetterReason, Outcome } from './outcome.js';
import type { InboxStore } from './store.js';

/** A pino-compatible logger: the subset inboxkit calls. Default is a silent logger. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * A validator of decoded payloads: any Standard Schema (zod 3.24+, zod 4, valibot, arktype) or any object
 * with zod's `safeParse`.
 */
export type PayloadSchema<P> =
  | {
      readonly '~standard': {
        readonly validate: (
          value: unknown,
        ) =>
          | { readonly value: P; readonly issues?: undefined }
          | { readonly issues: readonly unknown[] }
          | Promise<{ readonly value: P; readonly issues?: undefined } | { readonly issues: readonly unknown[] }>;
      };
    }
  | { safeParse(value: unknown): { success: true; data: P } | { success: false; error: unknown } };

/** Exponential backoff with full jitter. */
export interface BackoffPolicy {
  /** Delay before the 2nd attempt. Default is 1,000 ms. */
  readonly initialDelayMs?: number;
  /** Growth per attempt. Default is 2. */
  readonly multiplier?: number;
  /** Upper bound of one delay. Default is 300,000 ms (5 minutes). */
  readonly maxDelayMs?: number;
  /** `full` draws the delay uniformly in [0, computed]; `none` uses the computed delay. Default is `full`. */
  readonly jitter?: 'full' | 'none';
}

/**
 * What a handler reaches as `context.outbox`: empty in core, filled in by `@inboxkit/outbox` through declaration
 * merging (importing that package types it as its bound outbox). Configure it with the consumer's `outbox`
 * option; reading `context.outbox` without one throws a `ConfigurationError`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- an extension point, merged by @inboxkit/outbox
export interface HandlerOutbox {}

/** Which delivery an outbox is bound to: the consumer, the incoming message id and this attempt. */
export interface OutboxOrigin {
  readonly consumer: string;
  readonly messageId: string;
  readonly attempt: number;
}

/**
 * Binds an outbox to one handler run: `tx` is the run's transaction, so what the handler enqueues commits with
 * its inbox record and effect, or not at all. `@inboxkit/outbox`'s `transactionalOutbox()` makes one.
 */
export type OutboxBinder<Tx> = (tx: Tx, origin: OutboxOrigin) => HandlerOutbox;

/** What the handler gets besides the message. */
export interface HandlerContext<Tx> {
  /**
   * The transaction the effect must use: it commits together with the inbox record, or not at all.
   * For `PostgresInboxStore<DB>` this is Kysely's `Transaction<DB>`.
   */
  readonly tx: Tx;
  /** This attempt, 1-based, durable across restarts. */
  readonly attempt: number;
  /**
   * A key derived from (consumer, message id), the same on every attempt: pass it as the Idempotency-Key of
   * downstream calls (payment providers, e-mail APIs) whose effects live outside the transaction. One key per
   * message: a handler that makes two calls to the same downstream needs `downstreamKeyFor(step)` instead.
   */
  readonly downstreamKey: string;
  /**
   * The key of one named step of this handler, derived from (consumer, message id, step): the same on every
   * attempt and replay, different per step and from `downstreamKey`. Give every downstream call its own step,
   * since a provider that remembers a key refuses it for another request or answers the first response again.
   * The step is 1-100 characters without control characters, else a `ConfigurationError` (not retriable).
   * A bound function: it may be destructured from the context.
   *
   * @example
   * handler: async (message, { downstreamKeyFor }) => {
   *   await psp.charge(message.payload, { idempotencyKey: downstreamKeyFor('charge') });
   *   await psp.refundFee(message.payload, { idempotencyKey: downstreamKeyFor('refund-fee') });
   * }
   */
  readonly downstreamKeyFor: (step: string) => string;
  /** Aborted when the handler timeout passes or, in leased mode, when the lease is lost. */
  readonly signal: AbortSignal;
  readonly consumer: string;
  /** True when this delivery is an explicit DLQ replay. */
  readonly isReplay: boolean;
  readonly logger: Logger;
  /**
   * The outbox bound to `tx` (see the consumer's `outbox` option): messages enqueued here are published by the
   * relay only if this transaction commits. Made on first use. Throws `ConfigurationError` if no outbox is
   * configured.
   */
  readonly outbox: HandlerOutbox;
}

/** The handler: apply the message's effect through `context.tx`. Throw to fail the attempt. */
export type MessageHandler<P, Tx> = (message: DecodedMessage<P>, context: HandlerContext<Tx>) => Promise<void>;

/** What `hooks.onOutcome` receives. */
export interface OutcomeEvent {
  readonly consumer: string;
  readonly message: InboundMessage;
  readonly outcome: Outcome;
}

/** Configuration of `idempotentConsumer()`. Validated once, then frozen. */
export interface IdempotentConsumerConfig<P, Tx> {
  /** The consumer scope: the same message id is processed once per name. 1–200 printable characters. */
  readonly name: string;
  /** Where inbox records live. */
  readonly store: InboxStore<Tx>;
  readonly handler: MessageHandler<P, Tx>;
  /** Validates the decoded payload; failures are dead-lettered as `schema-invalid`. Default: none. */
  readonly schema?: PayloadSchema<P>;
  /** Turns the raw body into a payload. Default: UTF-8 JSON; failures are dead-lettered as `undecodable`. */
  readonly decode?: (body: Uint8Array | string | null) => unknown;
  /**
   * What makes two deliveries of one id "the same payload" (else the second is dead-lettered as
   * `payload-mismatch`). Default: the whole decoded payload. Give `{ exclude: [paths] }` to leave out fields a
   * producer's retry re-creates (a fresh `sentAt`, a trace id), `{ include: [paths] }` to keep only the fields that
   * carry the intent (dot paths into the decoded payload, before the schema), or a function of the message whose
   * result is canonically fingerprinted. Checked at start-up (`ConfigurationError`). A function that throws, or
   * answers what cannot be fingerprinted, dead-letters the message as `fingerprint-failed` (never retried).
   * Changing it changes the fingerprints of new rows: ids recorded before keep theirs, so a redelivery of one of
   * them may then be answered `payload-mismatch` until its row expires.
   *
   * @example
   * idempotentConsumer({ name: 'billing', store, handler, fingerprint: { exclude: ['sentAt', 'meta.traceId'] } });
   *
   * @example
   * idempotentConsumer({ name: 'billing', store, handler, fingerprint: (m) => {
   *   const { orderId, amount } = m.payload as Order;
   *   return [orderId, amount];
   * } });
   */
  readonly fingerprint?: FingerprintResolver<FingerprintInput>;
  /** Attempts in total before dead-lettering with reason `max-attempts`. Default is 5. */
  readonly maxAttempts?: number;
  readonly backoff?: BackoffPolicy;
  /** How long a completed id is remembered, in ms. Default is 7 days. */
  readonly dedupeWindowMs?: number;
  /**
   * `transactional` (default): claim, handler and completion commit in one transaction.
   * `leased`: the claim commits first with a lease and a fencing token; for effects outside Postgres.
   */
  readonly mode?: 'transactional' | 'leased';
  /** Lease length in leased mode. Default is 60,000 ms. Must exceed `handlerTimeoutMs`. */
  readonly leaseMs?: number;
  /** The handler's signal is aborted after this long. Default is 30,000 ms. */
  readonly handlerTimeoutMs?: number;
  /** How long a concurrent duplicate waits for the first delivery's commit before `retry`. Default is 5,000 ms. */
  readonly lockTimeoutMs?: number;
  /** Messages with no inbox row whose timestamp is older than the window. Default is `dead-letter`. */
  readonly latePolicy?: 'process' | 'dead-letter';
  /**
   * The intent's own time, for an inbox partitioned by day (`layout: 'daily-partitions'`): its row's day is the
   * UTC day of this time, so every resend of one intent lands on one day even when the producer re-publishes it
   * as a new record with a new broker timestamp. Called after decoding and the schema with the decoded message;
   * answer `undefined` when the message carries no such time (the CloudEvents `time` header, `ce_time` /
   * `ce-time`, then the message timestamp decide). A throw, or an answer that is not a valid `Date`, dead-letters
   * the message as `schema-invalid` with what it answered. Other stores ignore the time; the late-message rule
   * keeps the message timestamp. Default: none (CloudEvents `time`, else the message timestamp).
   *
   * @example
   * idempotentConsumer({ name: 'billing', store, handler, dayOf: (m) => new Date(m.payload.occurredAt) });
   */
  readonly dayOf?: (message: DecodedMessage<P>) => Date | undefined;
  /** Overrides the built-in classification of handler errors. */
  readonly isRetriable?: (error: unknown) => boolean;
  /** Longest accepted message id. Default is 512 characters. */
  readonly maxMessageIdLength?: number;
  readonly hooks?: {
    /** Called once per handled delivery, after the outcome is final. Errors thrown here are logged, not raised. */
    readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
  };
  /**
   * Gives the handler `context.outbox`, bound to its transaction: outgoing messages commit with the inbox record
   * and the effect (`transactionalOutbox()` from `@inboxkit/outbox`). Default: none.
   *
   * @example
   * idempotentConsumer({ name: 'orders', store, outbox: transactionalOutbox(),
   *   handler: async (m, { tx, outbox }) => { await insertOrder(tx, m.payload); await outbox.enqueue({ ... }); } });
   */
  readonly outbox?: OutboxBinder<Tx>;
  /**
   * A cache of completed deliveries in front of the inbox (`redisFastPath({ client })` from
   * `@inboxkit/core/redis`). After a commit the consumer records (name, id, fingerprint) in it for
   * `dedupeWindowMs`; before a claim, a record with this delivery's fingerprint answers `duplicate` (with
   * `source: 'fast-path'`) without touching Postgres. A miss, an error, a timeout (`fastPath.timeoutMs`,
   * default 20 ms), another fingerprint and every replay go to the inbox, which stays the authority: losing the
   * cache costs speed, never correctness. Default: none.
   *
   * @example
   * idempotentConsumer({ name: 'billing', store, handler, fastPath: redisFastPath({ client: redis }) });
   */
  readonly fastPath?: FastPath;
  /** Default is a silent logger. */
  readonly logger?: Logger;
  /** Where metrics go. Default is the global provider of `@opentelemetry/api` (no-op until an SDK registers). */
  readonly meterProvider?: MeterProvider;
  /**
   * Where spans go: each delivery's CONSUMER span (a child of the producer's span when the message carries a
   * W3C `traceparent`) and its handler's INTERNAL span (docs/operations.md#tracing). Default is the global provider
   * of `@opentelemetry/api` (no-op until an SDK registers).
   *
   * @example
   * idempotentConsumer({ name: 'billing', store, handler, tracerProvider: sdk.tracerProvider });
   */
  readonly tracerProvider?: TracerProvider;
}

/**
 * What a transport drives. An `idempotentConsumer(...)` also carries, out of this interface, the attempt ledger
 * a transport's delivery kit records started attempts through (`attemptLedgerOf`); an object that wraps one and
 * is handed to a transport forwards it with `withAttemptLedger`.
 */
export interface IdempotentConsumer<P = unknown, Tx = unknown> {
  readonly name: string;
  /** The validated configuration with every default filled in. */
  readonly config: Readonly<Required<Omit<IdempotentConsumerConfig<P, Tx>, 'schema' | 'decode' | 'isRetriable' | 'hooks' | 'logger' | 'meterProvider' | 'tracerProvider' | 'outbox' | 'fastPath' | 'dayOf' | 'fingerprint'>>> &
    IdempotentConsumerConfig<P, Tx> & { readonly backoff: Required<BackoffPolicy> };
  /** Handles one delivery. Resolves to an outcome; never rejects for a message's or the store's fault. */
  handle(message: InboundMessage): Promise<Outcome>;
  /**
   * Handles a fetched batch with few round trips: claimed and applied in one transaction, each message's
   * effect isolated by a savepoint. Outcomes are in input order. Same guarantees as `handle`.
   */
  handleBatch(messages: readonly InboundMessage[]): Promise<Outcome[]>;
}

/** What a consumer's `fingerprint` function gets: the id, the decoded payload (before the schema) and the headers. */
export interface FingerprintInput {
  readonly id: string;
  /** The decoded payload as `decode` (default: JSON) made it, before the schema. */
  readonly payload: unknown;
  readonly headers: Readonly<Record<string, string>>;
}

export type { DeadLetterReason };
