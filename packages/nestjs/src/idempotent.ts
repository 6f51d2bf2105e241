// @Idempotent(): the Idempotency-Key protocol of @inboxkit/http on one Nest route.

import 'reflect-metadata';
import { applyDecorators, SetMetadata, UseInterceptors } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum.js';
import { IdempotencyInterceptor } from './idempotency-interceptor.js';
import { IDEMPOTENT_ROUTE, type IdempotentOptions } from './idempotent-options.js';

/**
 * Tells Nest that the response is written by the interceptor, not by Nest's own response handling: the same
 * as a `@Res()` parameter, added after the method's own parameters, so the handler's signature is unchanged.
 * Nest then neither sends the handler's result a second time nor applies `@HttpCode`/`@Header` itself.
 */
function responseWrittenByInterceptor(): MethodDecorator {
  return (target, key) => {
    const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, target.constructor, key) ?? {}) as Record<
      string,
      { index: number }
    >;
    const method = (target as Record<string | symbol, unknown>)[key] as (...a: unknown[]) => unknown;
    const index = Math.max(method.length, ...Object.values(args).map((a) => a.index + 1));
    Reflect.defineMetadata(
      ROUTE_ARGS_METADATA,
      {
        ...args,
        [`${RouteParamtypes.RESPONSE}:${index}`]: { index, data: { passthrough: false }, pipes: [] },
      },
      target.constructor,
      key,
    );
  };
}

/**
 * Makes a route idempotent with `@inboxkit/http`'s protocol, on Express and on Fastify: the first request with
 * a key runs the handler and its response is stored; a retry gets the stored response byte for byte; a
 * concurrent retry gets 409 with `Retry-After`; the same key with another payload gets 422; a 5xx (or a thrown
 * error, an `HttpException` included) releases the key so a retry runs again. Guards run before the key is
 * claimed; pipes, interceptors of the route and the handler run inside it. The handler returns the body (sent
 * with `@HttpCode` or Nest's default status) or an `idempotentReply(...)`; `@IdempotencyCtx()` gives it the
 * key and `transaction()`. Needs `InboxkitModule` with its `idempotency` option.
 *
 * @example
 * @Post('payments') @Idempotent()
 * create(@Body() body: CreatePayment, @IdempotencyCtx() ctx: IdempotentRouteContext<Transaction<DB>>) {
 *   return ctx.transaction((tx) => insertPayment(tx, body));
 * }
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator {
  return applyDecorators(
    SetMetadata(IDEMPOTENT_ROUTE, Object.freeze({ ...options })),
    UseInterceptors(IdempotencyInterceptor),
    responseWrittenByInterceptor(),
  );
}
