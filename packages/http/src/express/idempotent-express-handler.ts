// idempotentExpressHandler(): the Idempotency-Key protocol around an Express route handler. Mount a body
// parser (express.json()) before it: the parsed body is part of the fingerprint.

import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { IdempotencyKeys } from '../idempotency-keys.js';
import type { IdempotentResponseInit } from '../http-response.js';
import { runIdempotent, type IdempotencyContext, type IdempotentRouteOptions } from '../run-idempotent.js';

/** Options of `idempotentExpressHandler`. */
export interface ExpressHandlerOptions extends IdempotentRouteOptions {
  /** The route keys are scoped to. Default is `req.baseUrl + req.path` (the path without the query string). */
  readonly route?: (request: Request) => string;
}

/** A handler: Express' request and the idempotency context; returns the response to send (and store). */
export type ExpressIdempotentHandler<DB> = (
  request: Request,
  context: IdempotencyContext<DB>,
) => Promise<IdempotentResponseInit>;

/**
 * Wraps `handler` as an Express request handler. Errors (a handler's, or the store's) go to `next`, after
 * the key is released.
 *
 * @example
 * app.post('/payments', express.json(), idempotentExpressHandler(keys, async (req, context) =>
 *   context.transaction(async (tx) => ({ status: 201, body: await charge(tx, req.body) }))));
 */
export function idempotentExpressHandler<DB>(
  keys: IdempotencyKeys<DB, Request>,
  handler: ExpressIdempotentHandler<DB>,
  options: ExpressHandlerOptions = {},
): RequestHandler {
  return (request: Request, response: Response, next: NextFunction): void => {
    const route = options.route?.(request) ?? `${request.baseUrl}${request.path}`;
    runIdempotent(
      keys,
      {
        method: request.method,
        route,
        headers: request.headers,
        body: request.body as unknown,
        native: request,
      },
      (context) => handler(request, context),
      options,
    ).then(
      (result) => {
        // setHeader, not res.set: Express would rewrite content-type, and replays must be byte-exact.
        for (const [name, value] of Object.entries(result.headers)) response.setHeader(name, value);
        response.status(result.status).end(result.body);
      },
      (error: unknown) => next(error),
    );
  };
}
