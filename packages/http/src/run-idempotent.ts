// runIdempotent(): the whole protocol around one handler call, shared by the adapters so each of them only
// translates its framework's request and writes the returned response.

import type { Transaction } from 'kysely';
import type { SqlSeam } from '@inboxkit/core/postgres';
import type { IdempotencyKeys } from './idempotency-keys.js';
import type { IdempotentRequest } from './idempotent-request.js';
import { HandlerTimeoutError, inboxkitTracer, withIncomingSpan, type Logger } from '@inboxkit/core';
import {
  problemResponse,
  toHttpResponse,
  unsendableHeaderReason,
  type HttpResponse,
  type IdempotentResponseInit,
} from './http-response.js';
import { InvalidResponseError } from './idempotency-errors.js';
import { safeLog } from './safe-log.js';
import { metricsOf, UNMATCHED_ROUTE, type IdempotencyOutcome } from './idempotency-key-metrics.js';

/** What a handler gets besides its framework's request. */
export interface IdempotencyContext<DB, Tx = Transaction<DB>> {
  /** The request's Idempotency-Key, or undefined when none was sent (and none was required). */
  readonly key: string | undefined;
  /** 1 for the first execution of this key, more after a release or a lease takeover. */
  readonly attempt: number;
  /** Aborted when the handler exceeds `handlerTimeoutMs` (the key is released then): pass it to external calls. */
  readonly signal: AbortSignal;
  /**
   * Runs `fn` in a transaction and stores the response it returns in that same transaction, so the business
   * writes and the replayable response commit together. Return its result from the handler.
   *
   * @example
   * return context.transaction(async (tx) => {
   *   const payment = await tx.insertInto('payment').values(values).returningAll().executeTakeFirstOrThrow();
   *   return { status: 201, body: payment };
   * });
   */
  transaction(fn: (tx: Tx) => Promise<IdempotentResponseInit>): Promise<IdempotentResponseInit>;
  /**
   * A recovery point for multi-step handlers with external calls between steps: `fn`'s writes and its
   * result commit together; a retry of the same key skips completed phases and gets their recorded results.
   * Put external calls between phases, with a downstream key that is the same on every attempt, e.g. an id a
   * phase created (unique across principals, unlike `context.key` alone), so the downstream dedupes them.
   *
   * @example
   * const order = await context.phase('reserve', (tx) => reserveStock(tx, req.body));
   * const charge = await psp.charge({ amount: order.total, idempotencyKey: `order-${order.id}` });
   * return context.transaction(async (tx) => ({ status: 201, body: await recordCharge(tx, order, charge) }));
   */
  phase<T>(name: string, fn: (tx: Tx) => Promise<T>): Promise<T>;
}

const TIMED_OUT = Symbol('timed out');

/** Runs `fn` in one of `seam`'s transactions, committed when it resolves (an unkeyed request's transaction). */
function inTransaction<Tx, T>(seam: SqlSeam<Tx>, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return seam.transaction(async (t) => ({ end: 'commit', value: await fn(t.tx) }));
}

/** The 500 for a response Node cannot send (`InvalidResponseError`): its message names the header. */
function invalidResponse(error: InvalidResponseError): HttpResponse {
  return problemResponse(500, 'Invalid response', error.message);
}

/**
 * A stored response made sendable: a row written before headers were checked may hold one Node refuses (it
 * would fail every replay of the key). Such headers are left out, and logged, so the client still learns the
 * status and body of the request that succeeded; a status outside 100–599 gets a 500 instead.
 */
function sendableReplay(response: HttpResponse, logger: Logger | undefined): HttpResponse {
  if (!Number.isInteger(response.status) || response.status < 100 || response.status > 599) {
    safeLog(
      logger,
      'error',
      { status: response.status },
      'idempotency keys: stored status cannot be replayed',
    );
    return problemResponse(
      500,
      'Stored response cannot be replayed',
      `The response stored for this Idempotency-Key has status ${response.status}, which cannot be sent.`,
    );
  }
  const headers: Record<string, string> = {};
  const dropped: string[] = [];
  for (const [name, value] of Object.entries(response.headers)) {
    if (unsendableHeaderReason(name, value) === undefined) headers[name] = value;
    else dropped.push(name);
  }
  if (dropped.length === 0) return response;
  safeLog(
    logger,
    'warn',
    { headers: dropped },
    'idempotency keys: stored response headers Node cannot send were left out of the replay',
  );
  return { ...response, headers };
}

/** Options of a route. */
export interface IdempotentRouteOptions {
  /** Whether a request without a key is refused with 400. Default is the `idempotencyKeys` config's (true). */
  readonly required?: boolean;
}

/**
 * Runs `handler` under the Idempotency-Key protocol and returns the response to write: the handler's, a
 * replay, or the protocol's own 400/409/422. A handler error releases the key and is rethrown; a response Node
 * cannot send (`InvalidResponseError`) is rolled back, releases the key and is answered 500 naming the header. A
 * replay of a stored header Node cannot send (a row stored before that check) leaves the header out.
 *
 * @example
 * const response = await runIdempotent(keys, request, (context) => context.transaction(async (tx) => …));
 */
export async function runIdempotent<DB, N, Tx = Transaction<DB>>(
  keys: IdempotencyKeys<DB, N, Tx>,
  request: IdempotentRequest<N>,
  handler: (context: IdempotencyContext<DB, Tx>) => Promise<IdempotentResponseInit>,
  options: IdempotentRouteOptions = {},
): Promise<HttpResponse> {
  // The request's span continues the caller's trace (`traceparent`), so the handler's spans and what it
  // enqueues in the outbox join it.
  const method = request.method.toUpperCase();
  return withIncomingSpan(
    inboxkitTracer(),
    `${method} ${request.route}`,
    request.headers,
    { 'http.request.method': method, 'http.route': request.route },
    () => runProtocol(keys, request, handler, options),
  );
}

async function runProtocol<DB, N, Tx>(
  keys: IdempotencyKeys<DB, N, Tx>,
  request: IdempotentRequest<N>,
  handler: (context: IdempotencyContext<DB, Tx>) => Promise<IdempotentResponseInit>,
  options: IdempotentRouteOptions,
): Promise<HttpResponse> {
  const instruments = metricsOf(keys);
  const route = request.routeTemplate ?? UNMATCHED_ROUTE;
  const method = request.method.toUpperCase();
  /** Counts what became of the request (and tells `onOutcome`); returns `response`. */
  const report = (
    outcome: IdempotencyOutcome,
    response: HttpResponse,
    key: string | undefined,
    durationMs?: number,
  ): HttpResponse => {
    count(outcome, response.status, key, durationMs);
    return response;
  };
  // A thrown error reaches the adapter's error path: a 500.
  const reportThrown = (outcome: IdempotencyOutcome, key: string | undefined, durationMs: number): void =>
    count(outcome, 500, key, durationMs);
  const count = (
    outcome: IdempotencyOutcome,
    status: number,
    key: string | undefined,
    durationMs: number | undefined,
  ): void =>
    instruments?.outcome({
      outcome,
      route,
      method,
      status,
      key,
      ...(durationMs === undefined ? {} : { durationMs }),
    });
  const ran = (startedAt: number, result: 'ok' | 'error' | 'timeout'): number => {
    const ms = performance.now() - startedAt;
    instruments?.handlerDuration(route, method, ms, result);
    return ms;
  };
  const decision = await keys.begin(request, options);
  if (decision.kind === 'unkeyed') {
    const startedAt = performance.now();
    let response: HttpResponse;
    try {
      response = toHttpResponse(
        await handler({
          key: undefined,
          attempt: 1,
          signal: new AbortController().signal,
          // Checked before the commit, as for a keyed request: no effect commits with an unsendable response.
          transaction: (fn) =>
            inTransaction(keys.config.seam, async (tx) => {
              const init = await fn(tx);
              toHttpResponse(init);
              return init;
            }),
          phase: (_name, fn) => inTransaction(keys.config.seam, fn),
        }),
      );
    } catch (error) {
      const ms = ran(startedAt, 'error');
      if (error instanceof InvalidResponseError)
        return report('unkeyed', invalidResponse(error), undefined, ms);
      reportThrown('unkeyed', undefined, ms);
      throw error;
    }
    return report('unkeyed', response, undefined, ran(startedAt, 'ok'));
  }
  if (decision.kind === 'replay')
    return report('replay', sendableReplay(decision.response, keys.config.logger), decision.key);
  if (decision.kind !== 'proceed') return report(decision.kind, decision.response, decision.key);
  const key = decision.key;
  const controller = new AbortController();
  const timeoutMs = keys.config.handlerTimeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), timeoutMs);
  });
  const startedAt = performance.now();
  const running = handler({
    key: decision.key,
    attempt: decision.attempt,
    signal: controller.signal,
    transaction: (fn) => decision.transaction(fn),
    phase: (name, fn) => decision.phase(name, fn),
  });
  // After a timeout nobody awaits the handler any more; its late failure must not become an unhandled rejection.
  running.catch(() => {});
  let init: IdempotentResponseInit;
  let ms: number;
  try {
    const result = await Promise.race([running, timedOut]);
    if (result === TIMED_OUT) {
      ms = ran(startedAt, 'timeout');
      // Release first, then abort: a handler woken by the abort then finds its lease gone and cannot commit.
      await decision.release();
      controller.abort(
        new HandlerTimeoutError(`the handler ran longer than handlerTimeoutMs (${timeoutMs})`),
      );
      const response = problemResponse(
        503,
        'Handler timed out',
        `The request took longer than ${timeoutMs} ms; retry with the same Idempotency-Key.`,
        {
          'retry-after': String(keys.config.retryAfterSeconds),
        },
      );
      return report('timeout', response, key, ms);
    }
    init = result;
    ms = ran(startedAt, 'ok');
  } catch (error) {
    const failedMs = ran(startedAt, 'error');
    try {
      await decision.release();
    } catch (releaseError) {
      reportThrown('released', key, failedMs);
      throw releaseError;
    }
    // transaction() refused a response Node cannot send: rolled back and released, answered here.
    if (error instanceof InvalidResponseError)
      return report('released', invalidResponse(error), key, failedMs);
    reportThrown('released', key, failedMs);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  let response: HttpResponse;
  try {
    response = decision.settled ? toHttpResponse(init) : await decision.complete(init);
  } catch (error) {
    // complete() has released the key; after transaction() the response was checked before its commit.
    if (error instanceof InvalidResponseError) return report('released', invalidResponse(error), key, ms);
    reportThrown('released', key, ms);
    throw error;
  }
  // Stored, unless storeStatus refused it (a 5xx by default): then the key was released.
  return report(keys.config.storeStatus(response.status) ? 'completed' : 'released', response, key, ms);
}
