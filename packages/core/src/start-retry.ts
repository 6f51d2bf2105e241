// For transports: start() keeps trying to reach the broker, as a consumer that lost its connection after start does: a process
// started while the broker restarts (or before it is up) waits for it instead of exiting. Failures retrying
// cannot fix (credentials, permissions, a conflicting topology) reject at once; `startTimeoutMs` bounds the rest.

import type { Logger } from './consumer-types.js';
import { InboxkitError } from './errors.js';

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

/**
 * The property `name` of `error` when it is an object, else `undefined`: how the transports' error tables read
 * a client's errors (`errorField(e, 'type')`, `errorField(e, '$fault')`) without a cast.
 */
export function errorField(error: unknown, name: string): unknown {
  return typeof error === 'object' && error !== null ? (error as Record<string, unknown>)[name] : undefined;
}

function codeOf(error: unknown): unknown {
  return errorField(error, 'code');
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

/**
 * Resolves once at least `ms` of real time has passed since the call, or at once when `signal` aborts.
 *
 * At least: Node starts a timer from the event loop's cached clock, in whole milliseconds, so a timer can fire a
 * millisecond (on a busy loop, more) before its delay has passed. A caller that waits out a delay the inbox
 * measured (a retry's, from the failure's transaction on Postgres' clock, which began before this call) and then
 * claims again would be answered "not yet" and spend a claim; the rest is slept again instead.
 */
export async function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted || ms <= 0) return;
  const until = performance.now() + ms;
  for (let left = ms; left > 0 && !signal.aborted; left = until - performance.now()) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.ceil(left));
      signal.addEventListener('abort', done);
    });
  }
}

/** The delay before attempt `attempt + 1`: doubling from `initialMs` up to `maxMs`, drawn from [½, 1] of the step. */
export function startRetryDelay(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Options of `retryStart`. */
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
  /** What cannot be reached, in the timeout's message. Default is `the broker`. */
  readonly service?: string;
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
      await abortableSleep(delay, o.signal);
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
        `last error: ${last.name}: ${last.message}. Check that ${opts.service ?? 'the broker'} is up and reachable at the address ` +
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
