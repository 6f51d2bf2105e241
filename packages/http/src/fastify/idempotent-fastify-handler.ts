// idempotentFastifyHandler(): the Idempotency-Key protocol around a Fastify route handler. Fastify parses JSON
// bodies itself; the parsed body is part of the fingerprint.

import type { Transaction } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyKeys } from '../idempotency-keys.js';
import type { IdempotentResponseInit } from '../http-response.js';
import { matchedRoute } from '../matched-route.js';
import { requestPath } from '../request-path.js';
import { runIdempotent, type IdempotencyContext, type IdempotentRouteOptions } from '../run-idempotent.js';

/** Options of `idempotentFastifyHandler`. */
export interface FastifyHandlerOptions extends IdempotentRouteOptions {
  /**
   * The route keys are scoped to. Default is the route Fastify matched (`request.routeOptions.url`, the pattern
   * with its prefix) with the path parameters (`matchedRoute`), so every spelling Fastify routes to one handler
   * (trailing slash, case, doubled slashes, percent-encoding, as its router options allow) shares a key.
   */
  readonly route?: (request: FastifyRequest) => string;
}

/** The route Fastify matched with its parameters (Fastify 4 before `routeOptions`: `routerPath`). */
function fastifyRoute(request: FastifyRequest): string {
  const pattern =
    (request.routeOptions as { url?: string } | undefined)?.url ??
    (request as unknown as { routerPath?: string }).routerPath;
  if (pattern === undefined) return requestPath(request.url);
  return matchedRoute(pattern, request.params as Record<string, unknown> | undefined);
}

/** A handler: Fastify's request and the idempotency context; returns the response to send (and store). */
export type FastifyIdempotentHandler<DB, Tx = Transaction<DB>> = (
  request: FastifyRequest,
  context: IdempotencyContext<DB, Tx>,
) => Promise<IdempotentResponseInit>;

/**
 * Wraps `handler` as a Fastify route handler. Errors reach Fastify's error handler after the key is released.
 *
 * @example
 * app.post('/payments', idempotentFastifyHandler(keys, async (req, context) =>
 *   context.transaction(async (tx) => ({ status: 201, body: await charge(tx, req.body) }))));
 */
export function idempotentFastifyHandler<DB, Tx = Transaction<DB>>(
  keys: IdempotencyKeys<DB, FastifyRequest, Tx>,
  handler: FastifyIdempotentHandler<DB, Tx>,
  options: FastifyHandlerOptions = {},
): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> {
  return async (request, reply) => {
    const route = options.route?.(request) ?? fastifyRoute(request);
    const start = request.url.indexOf('?');
    const result = await runIdempotent(
      keys,
      {
        method: request.method,
        route,
        query: start < 0 ? '' : request.url.slice(start + 1),
        headers: request.headers,
        body: request.body,
        native: request,
      },
      (context) => handler(request, context),
      options,
    );
    return reply.code(result.status).headers(result.headers).send(result.body);
  };
}
