// start() keeps trying to reach the broker, as a consumer that lost its connection after start does: a process
// started while the broker restarts (or before it is up) waits for it instead of exiting. Failures retrying
// cannot fix (credentials, permissions, a conflicting topology) reject at once; `startTimeoutMs` bounds the rest.

import { ConfigurationError, InboxkitError, isInboxkitError } from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';

/**
 * `start()` could not reach the broker within `startTimeoutMs`. `cause` is the last failure; `attempts`
 * counts the connection attempts made. Raise `startTimeoutMs`, or check the address and the broker.
 */
export class StartTimeoutError extends InboxkitError {
  readonly attempts: number;

  constructor(message: string, options: { cause?: unknown; attempts: number }) {
    super('START_TIMEOUT', message, true, { cause: options.cause });
    this.attempts = options.attempts;
  }
}

/** Socket-level codes a later attempt can get past: the broker is down, restarting, or not reachable yet. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ESOCKETTIMEDOUT',
]);

/** TLS failures: a certificate or protocol mismatch does not heal by itself. */
const TLS_CODES = new Set([
  'EPROTO',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** The error, its `cause` chain and an AggregateError's members (Node's happy-eyeballs connect). */
export function errorChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  const visit = (e: unknown, depth: number): void => {
    if (e === undefined || e === null || depth > 8 || chain.includes(e)) return;
    chain.push(e);
    if (e instanceof AggregateError) for (const member of e.errors) visit(member, depth + 1);
    if (typeof e === 'object') visit((e as { cause?: unknown }).cause, depth + 1);
  };
  visit(error, 0);
  return chain;
}

function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
}

/** True when some error of the chain has a socket-level code of a broker that is down or unreachable. */
export function isTransientSocketError(error: unknown): boolean {
  return errorChain(error).some((e) => TRANSIENT_CODES.has(codeOf(e) as string));
}

/** The TLS failure in the chain, if any. */
export function tlsFailure(error: unknown): unknown {
  return errorChain(error).find((e) => TLS_CODES.has(codeOf(e) as string));
}

/** True for the errors of a programming or option mistake, which no retry fixes. */
export function isProgrammerError(error: unknown): boolean {
  return (
    error instanceof TypeError ||
    error instanceof RangeError ||
    error instanceof SyntaxError ||
    error instanceof ReferenceError
  );
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export async function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted || ms <= 0) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

/** The delay before attempt `attempt + 1`: doubling from `initialMs` up to `maxMs`, drawn from [½, 1] of the step. */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

export interface RetryStartOptions<T> {
  /** One attempt at connecting (and whatever else start needs). */
  readonly attempt: () => Promise<T>;
  /** The error to reject with when retrying cannot help, or `undefined` when the failure is transient. */
  readonly permanent: (error: unknown) => unknown;
  /** The pause after failed attempt `n` (0-based). */
  readonly delayMs: (attempt: number) => number;
  readonly timeoutMs: number;
  /** Aborted by `stop()`: the start ends at once and resolves as stopped. */
  readonly signal: AbortSignal;
  /** Receives an attempt still running when the start was stopped or timed out, to clean up after it. */
  readonly abandon: (attempt: Promise<T>) => void;
  readonly logger: Logger;
  /** Names the consumer in messages, e.g. `rabbitmq consumer`. */
  readonly what: string;
  /** Logged with every failure (queue, topics, …). */
  readonly context: Readonly<Record<string, unknown>>;
}

function summary(error: unknown): { name: string; message: string; code?: unknown } {
  if (error instanceof Error) return { name: error.name, message: error.message, code: codeOf(error) };
  return { name: 'Error', message: String(error) };
}

type Race<T> = { readonly value: T } | 'stopped' | 'timeout';

/**
 * Runs `attempt` until it succeeds, backing off between failures (each logged at warn with the next delay).
 * Rejects with `permanent(error)` when that is defined, and with a `StartTimeoutError` once `timeoutMs` has
 * passed. Resolves `{ value }`, or `undefined` when `signal` aborted first.
 */
export async function retryStart<T>(o: RetryStartOptions<T>): Promise<{ readonly value: T } | undefined> {
  const began = Date.now();
  const deadline = began + o.timeoutMs;
  let lastError: unknown;
  for (let attempt = 0; ; attempt++) {
    if (o.signal.aborted) return undefined;
    const pending = o.attempt();
    let result: Race<T>;
    try {
      result = await race(pending, o.signal, deadline);
    } catch (error) {
      if (o.signal.aborted) return undefined;
      const fatal = o.permanent(error);
      if (fatal !== undefined) throw fatal;
      lastError = error;
      const delay = o.delayMs(attempt);
      if (Date.now() + delay >= deadline) throw timedOut(o, attempt + 1, lastError);
      o.logger.warn(
        { ...o.context, err: summary(error), attempt: attempt + 1, retryInMs: Math.round(delay) },
        `${o.what}: cannot connect at start; retrying`,
      );
      await sleep(delay, o.signal);
      continue;
    }
    if (result === 'stopped' || result === 'timeout') {
      pending.then(
        () => undefined,
        () => undefined,
      );
      o.abandon(pending);
      if (result === 'stopped') return undefined;
      throw timedOut(o, attempt + 1, lastError ?? new Error('the attempt in progress did not finish'));
    }
    return result;
  }

  function timedOut(opts: RetryStartOptions<T>, attempts: number, cause: unknown): StartTimeoutError {
    const last = summary(cause);
    return new StartTimeoutError(
      `${opts.what} could not connect within startTimeoutMs (${opts.timeoutMs} ms, ${attempts} attempt(s)); ` +
        `last error: ${last.name}: ${last.message}. Check that the broker is up and reachable at the address ` +
        'given, or raise startTimeoutMs',
      { cause, attempts },
    );
  }
}

const MAX_TIMER_MS = 2_147_483_647;

/** Settles with the attempt, or with 'stopped' / 'timeout' when either comes first. */
async function race<T>(pending: Promise<T>, signal: AbortSignal, deadline: number): Promise<Race<T>> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const interrupts = new Promise<'stopped' | 'timeout'>((resolve) => {
    onAbort = () => resolve('stopped');
    signal.addEventListener('abort', onAbort, { once: true });
    const remaining = deadline - Date.now();
    // setTimeout cannot wait longer than 2^31 - 1 ms; a deadline that far away is as good as none.
    if (remaining <= MAX_TIMER_MS) timer = setTimeout(() => resolve('timeout'), Math.max(0, remaining));
  });
  try {
    return await Promise.race([pending.then((value) => ({ value })), interrupts]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

/** Kafka error types that mean "the credentials or the ACLs say no": no retry fixes them. */
const AUTH_TYPES = new Set([
  'SASL_AUTHENTICATION_FAILED',
  'ILLEGAL_SASL_STATE',
  'UNSUPPORTED_SASL_MECHANISM',
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
]);

/** Kafka error types that mean "the request's settings are invalid". */
const INVALID_TYPES = new Set([
  'INVALID_TOPIC_EXCEPTION',
  'INVALID_GROUP_ID',
  'INVALID_SESSION_TIMEOUT',
  'INCONSISTENT_GROUP_PROTOCOL',
  'INVALID_CONFIG',
  'UNSUPPORTED_VERSION',
]);

/** kafkajs errors that are transient whatever their `retriable` flag says (kafkajs restarts on them too). */
const TRANSIENT_NAMES = new Set([
  'KafkaJSNumberOfRetriesExceeded',
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
  'KafkaJSBrokerNotFound',
  'KafkaJSGroupCoordinatorNotFound',
  'KafkaJSMetadataNotLoaded',
  'KafkaJSTopicMetadataNotLoaded',
  'KafkaJSLockTimeout',
  'KafkaJSStaleTopicMetadataAssignment',
]);

function field(error: unknown, name: string): unknown {
  return typeof error === 'object' && error !== null ? (error as Record<string, unknown>)[name] : undefined;
}

/**
 * The error `start()` rejects with when retrying cannot help (a ConfigurationError that says what to change,
 * or a non-retriable kafkajs error as it is), or `undefined` for a transient failure: a broker down, starting
 * or unreachable, a timeout, no group coordinator or metadata yet.
 */
export function kafkaStartFailure(error: unknown): unknown {
  const chain = errorChain(error);
  for (const e of chain) {
    const type = field(e, 'type');
    if (field(e, 'name') === 'KafkaJSSASLAuthenticationError' || AUTH_TYPES.has(type as string)) {
      return new ConfigurationError(
        `Kafka refused the client's credentials or permissions (${String(type ?? field(e, 'name'))}: ` +
          `${String(field(e, 'message'))}): check the \`sasl\` settings (mechanism, user, password) and \`ssl\` of ` +
          'new Kafka({ … }), and the ACLs of the user for the consumer group, the topics and their dead-letter topics',
        { cause: error },
      );
    }
    if (INVALID_TYPES.has(type as string)) {
      return new ConfigurationError(
        `Kafka rejected the consumer's settings (${String(type)}: ${String(field(e, 'message'))}): check the ` +
          "group id, the topic names and the session timeout (within the broker's group.min/max.session.timeout.ms)",
        { cause: error },
      );
    }
  }
  const tls = tlsFailure(error);
  if (tls !== undefined) {
    return new ConfigurationError(
      `kafkaConsumer: the TLS handshake with Kafka failed (${String(field(tls, 'message'))}): check \`ssl\` of ` +
        'new Kafka({ … }), the broker port (TLS and plaintext listeners differ) and the certificates',
      { cause: error },
    );
  }
  if (isInboxkitError(error) && !error.retriable) return error;
  if (
    isTransientSocketError(error) ||
    chain.some((e) => field(e, 'retriable') === true || TRANSIENT_NAMES.has(field(e, 'name') as string))
  ) {
    return undefined;
  }
  if (isProgrammerError(error)) {
    return new ConfigurationError(
      `kafkaConsumer: starting failed with ${String(field(error, 'name'))}: ${String(field(error, 'message'))}; ` +
        'retrying cannot fix that: check the options of the Kafka client and consumer',
      { cause: error },
    );
  }
  // kafkajs marks what a retry cannot fix (retriable: false): say so now rather than retry for ever.
  return error;
}
