// runIdempotent(): the whole protocol around one handler call, shared by the adapters so each of them only
// translates its framework's request and writes the returned response.

import type { Transaction } from 'kysely';
import type { SqlSeam } from '@inboxkit/core/postgres';
import type { IdempotencyKeys } from './idempotency-keys.js';
import type { IdempotentRequest } from './idempotent-request.js';
import { HandlerTimeoutError, inboxkitTracer, withIncomingSpan } from '@inboxkit/core';
import {
  problemResponse,
  toHttpResponse,
  type HttpResponse,
  type IdempotentResponseInit,
} from './http-response.js';

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

/** Options of a route. */
export interface IdempotentRouteOptions {
  /** Whether a request without a key is refused with 400. Default is the `idempotencyKeys` config's (true). */
  readonly required?: boolean;
}

/**
 * Runs `handler` under the Idempotency-Key protocol and returns the response to write: the handler's, a
 * replay, or the protocol's own 400/409/422. A handler error releases the key and is rethrown.
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
  const decision = await keys.begin(request, options);
  if (decision.kind === 'unkeyed') {
    return toHttpResponse(
      await handler({
        key: undefined,
        attempt: 1,
        signal: new AbortController().signal,
        transaction: (fn) => inTransaction(keys.config.seam, fn),
        phase: (_name, fn) => inTransaction(keys.config.seam, fn),
      }),
    );
  }
  if (decision.kind !== 'proceed') return decision.response;
  const controller = new AbortController();
  const timeoutMs = keys.config.handlerTimeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), timeoutMs);
  });
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
  try {
    const result = await Promise.race([running, timedOut]);
    if (result === TIMED_OUT) {
      // Release first, then abort: a handler woken by the abort then finds its lease gone and cannot commit.
      await decision.release();
      controller.abort(
        new HandlerTimeoutError(`the handler ran longer than handlerTimeoutMs (${timeoutMs})`),
      );
      return problemResponse(
        503,
        'Handler timed out',
        `The request took longer than ${timeoutMs} ms; retry with the same Idempotency-Key.`,
        {
          'retry-after': String(keys.config.retryAfterSeconds),
        },
      );
    }
    init = result;
  } catch (error) {
    await decision.release();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return decision.settled ? toHttpResponse(init) : decision.complete(init);
}
