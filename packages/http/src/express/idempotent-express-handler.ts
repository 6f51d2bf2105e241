// idempotentExpressHandler(): the Idempotency-Key protocol around an Express route handler. Mount a body
// parser (express.json()) before it: the parsed body is part of the fingerprint.

import type { Transaction } from 'kysely';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { IdempotencyKeys } from '../idempotency-keys.js';
import type { IdempotentResponseInit } from '../http-response.js';
import { matchedRoute } from '../matched-route.js';
import { requestHeaders } from '../request-headers.js';
import { requestPath } from '../request-path.js';
import { sendResponse, type ResponseWriter } from '../send-response.js';
import { runIdempotent, type IdempotencyContext, type IdempotentRouteOptions } from '../run-idempotent.js';

/** Options of `idempotentExpressHandler`. */
export interface ExpressHandlerOptions extends IdempotentRouteOptions {
  /**
   * The route keys are scoped to. Default is the route Express matched: `req.baseUrl` (the mount path, as the
   * client spelled it, in `requestPath` form) + `req.route.path` (the pattern), with the path parameters
   * (`matchedRoute`); without a matched route (mounted with `app.use`), `requestPath(req.baseUrl + req.path)`.
   */
  readonly route?: (request: Request) => string;
  /**
   * The route template for metrics and `onOutcome`. Default is `req.baseUrl` + `req.route.path`
   * (`/payments/:id`), or `'unmatched'` without a matched route. `req.baseUrl` is the mount path as the client
   * spelled it: under a router mounted at a path with parameters (`app.use('/tenants/:tenant', router)`) give
   * the pattern here, or every tenant becomes its own series.
   *
   * @example
   * idempotentExpressHandler(keys, handler, { routeTemplate: (req) => `/tenants/:tenant${req.route.path}` });
   */
  readonly routeTemplate?: (request: Request) => string;
}

/**
 * The route Express matched, with its parameters: every spelling Express routes to one handler (a trailing
 * slash, another case) gives the same string.
 */
function expressRoute(request: Request): string {
  // A string, a RegExp or an array of them (one route for several patterns).
  const pattern = (request.route as { path?: string | RegExp | (string | RegExp)[] } | undefined)?.path;
  if (pattern === undefined) return requestPath(`${request.baseUrl}${request.path}`);
  const path = Array.isArray(pattern) ? pattern.map(String).join(',') : String(pattern);
  const base = request.baseUrl === '' ? '' : requestPath(request.baseUrl);
  return matchedRoute(`${base === '/' ? '' : base}${path}`, request.params);
}

/**
 * The pattern Express matched, for metrics: the mount path + `req.route.path`, without parameter values
 * (`/payments/:id`); undefined without a matched route (mounted with `app.use`).
 */
function expressRouteTemplate(request: Request): string | undefined {
  const pattern = (request.route as { path?: string | RegExp | (string | RegExp)[] } | undefined)?.path;
  if (pattern === undefined) return undefined;
  const path = Array.isArray(pattern) ? pattern.map(String).join(',') : String(pattern);
  const base = request.baseUrl === '' ? '' : requestPath(request.baseUrl);
  const template = `${base === '/' ? '' : base}${path}`;
  return template.length > 1 && template.endsWith('/') ? template.slice(0, -1) : template;
}

function queryOf(url: string): string {
  const start = url.indexOf('?');
  return start < 0 ? '' : url.slice(start + 1);
}

/** A handler: Express' request and the idempotency context; returns the response to send (and store). */
export type ExpressIdempotentHandler<DB, Tx = Transaction<DB>> = (
  request: Request,
  context: IdempotencyContext<DB, Tx>,
) => Promise<IdempotentResponseInit>;

// setHeader, not res.set: Express would rewrite content-type, and replays must be byte-exact.
const writeExpress: ResponseWriter = (response, value) => {
  for (const [name, value_] of Object.entries(value.headers)) response.setHeader(name, value_);
  response.statusCode = value.status;
  response.end(value.body);
};

/**
 * Wraps `handler` as an Express request handler. Errors (a handler's, or the store's) go to `next`, after
 * the key is released. The handler returns its response and does not write to `res` itself: a write before the
 * response is stored is refused (`ResponseAlreadySentError` to `next`: rolled back, key released); one after the
 * commit is logged and nothing more is written. Writing never throws: a response Node refuses is answered 500.
 *
 * @example
 * app.post('/payments', express.json(), idempotentExpressHandler(keys, async (req, context) =>
 *   context.transaction(async (tx) => ({ status: 201, body: await charge(tx, req.body) }))));
 */
export function idempotentExpressHandler<DB, Tx = Transaction<DB>>(
  keys: IdempotencyKeys<DB, Request, Tx>,
  handler: ExpressIdempotentHandler<DB, Tx>,
  options: ExpressHandlerOptions = {},
): RequestHandler {
  return (request: Request, response: Response, next: NextFunction): void => {
    const route = options.route?.(request) ?? expressRoute(request);
    runIdempotent(
      keys,
      {
        method: request.method,
        route,
        routeTemplate: options.routeTemplate?.(request) ?? expressRouteTemplate(request),
        query: queryOf(request.originalUrl),
        headers: requestHeaders(request),
        body: request.body as unknown,
        responseStarted: () => response.headersSent,
        native: request,
      },
      (context) => handler(request, context),
      options,
    ).then(
      (result) => sendResponse(response, result, writeExpress, keys.config.logger),
      (error: unknown) => next(error),
    );
  };
}
