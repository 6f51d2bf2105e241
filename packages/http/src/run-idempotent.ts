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
  const decision = await keys.begin(request, options);
  if (decision.kind === 'unkeyed') {
    try {
      return toHttpResponse(
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
      if (error instanceof InvalidResponseError) return invalidResponse(error);
      throw error;
    }
  }
  if (decision.kind === 'replay') return sendableReplay(decision.response, keys.config.logger);
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
    // transaction() refused a response Node cannot send: rolled back and released, answered here.
    if (error instanceof InvalidResponseError) return invalidResponse(error);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  try {
    return decision.settled ? toHttpResponse(init) : await decision.complete(init);
  } catch (error) {
    // complete() has released the key; after transaction() the response was checked before its commit.
    if (error instanceof InvalidResponseError) return invalidResponse(error);
    throw error;
  }
}
