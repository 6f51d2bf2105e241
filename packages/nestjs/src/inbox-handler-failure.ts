// How the original error of a failed @EventPattern handler crosses Nest's RPC exception layer, which replaces
// every error it does not know with `{ status: 'error', message: 'Internal server error' }`: the error is
// carried in a branded object that the layer passes through untouched, and unwrapped by the transport strategy.

import { HttpException } from '@nestjs/common';
import { SchemaValidationError } from '@inboxkit/core';

const FAILURE = Symbol.for('inboxkit.nestjs.handler-failure');
const CONTEXT = Symbol.for('inboxkit.nestjs.inbox-context');

/** The carrier of a handler's error through Nest's exception layer. */
export interface InboxHandlerFailure {
  readonly [FAILURE]: true;
  readonly error: unknown;
}

/** What the transport's context offers the interceptor: a way to wrap an error so Nest passes it through. */
export interface InboxContextMark {
  readonly [CONTEXT]: true;
  /** Wraps `failure` in what Nest's RPC exception filter passes through unchanged (an `RpcException`). */
  passThrough(failure: InboxHandlerFailure): unknown;
}

/** The brand of inbox contexts (the transport's `InboxContext`). */
export const INBOX_CONTEXT_BRAND: typeof CONTEXT = CONTEXT;

/** True for the context the inboxkit transport strategy hands its handlers, also from another copy of the package. */
export function isInboxContextMark(value: unknown): value is InboxContextMark {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[CONTEXT] === true;
}

/**
 * What the consumer should see of a handler's error. A 400 or 422 `HttpException` (what Nest's `ValidationPipe`
 * throws for an invalid `@Payload()`) becomes a `SchemaValidationError`: the message is dead-lettered with its
 * reason at once instead of being retried until `maxAttempts`. Every other error is kept as it is, so
 * `PermanentError`, `RetryableError` and the built-in classification apply.
 */
export function consumerErrorOf(error: unknown): unknown {
  if (error instanceof HttpException && (error.getStatus() === 400 || error.getStatus() === 422)) {
    const response = error.getResponse();
    const issues =
      typeof response === 'object' &&
      response !== null &&
      Array.isArray((response as { message?: unknown }).message)
        ? (response as { message: unknown[] }).message
        : [response];
    return new SchemaValidationError(
      `the payload failed validation: ${issues.map((i) => (typeof i === 'string' ? i : JSON.stringify(i))).join('; ')}`,
      issues,
      {
        cause: error,
      },
    );
  }
  return error;
}

/** Wraps a handler's error for the trip through Nest's exception layer. */
export function handlerFailure(error: unknown): InboxHandlerFailure {
  return { [FAILURE]: true, error: consumerErrorOf(error) };
}

/** The handler's error carried by `value`, or `undefined` when `value` is no carrier. */
export function unwrapHandlerFailure(value: unknown): { readonly error: unknown } | undefined {
  if (typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[FAILURE] === true) {
    return { error: (value as InboxHandlerFailure).error };
  }
  return undefined;
}
