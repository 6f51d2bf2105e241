// What an @Idempotent() handler gets through @IdempotencyCtx(): the key, the attempt, the abort signal, and a
// transaction in which its writes and the stored response commit together.

import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { ConfigurationError } from '@inboxkit/core';

/** The idempotency context of one request of an `@Idempotent()` route. */
export interface IdempotentRouteContext<Tx = unknown> {
  /** The request's Idempotency-Key, or undefined when none was sent (and none was required). */
  readonly key: string | undefined;
  /** 1 for the first execution of this key, more after a release or a lease takeover. */
  readonly attempt: number;
  /** Aborted when the handler exceeds `handlerTimeoutMs` (the key is released then): pass it to external calls. */
  readonly signal: AbortSignal;
  /**
   * Runs `fn` in a transaction of the module's data layer and stores the response in that same transaction, so
   * the business writes and the replayable response commit together. `fn`'s result is the response: a body
   * sent with the route's status, or an `idempotentReply(...)`. Return it from the handler.
   *
   * @example
   * return ctx.transaction(async (tx) => insertPayment(tx, body));
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * A recovery point: `fn`'s writes and result commit together; a retry of the same key skips completed phases
   * and gets their recorded results (see `IdempotencyContext.phase` of `@inboxkit/http`).
   */
  phase<T>(name: string, fn: (tx: Tx) => Promise<T>): Promise<T>;
}

/** Where the interceptor leaves the context on the request for `@IdempotencyCtx()`. */
export const ROUTE_CONTEXT = Symbol.for('inboxkit.nestjs.idempotent-route-context');

/**
 * The `IdempotentRouteContext` of the request, for a handler decorated with `@Idempotent()`. Anywhere else it
 * throws a `ConfigurationError`.
 *
 * @example
 * @Post() @Idempotent()
 * create(@Body() body: CreatePayment, @IdempotencyCtx() ctx: IdempotentRouteContext<Transaction<DB>>) {
 *   return ctx.transaction((tx) => insertPayment(tx, body));
 * }
 */
export const IdempotencyCtx = createParamDecorator((_data: unknown, context: ExecutionContext) => {
  const request = context.switchToHttp().getRequest<Record<symbol, unknown>>();
  const found = request[ROUTE_CONTEXT];
  if (found === undefined)
    throw new ConfigurationError(
      '@IdempotencyCtx() is only available in a handler decorated with @Idempotent()',
    );
  return found;
});
