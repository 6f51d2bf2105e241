// idempotentFastifyHandler(): the Idempotency-Key protocol around a Fastify route handler. Fastify parses JSON
// bodies itself; the parsed body is part of the fingerprint.

import type { Transaction } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyKeys } from '../idempotency-keys.js';
import type { IdempotentResponseInit } from '../http-response.js';
import { matchedRoute } from '../matched-route.js';
import { requestHeaders } from '../request-headers.js';
import { requestPath } from '../request-path.js';
import { safeLog } from '../safe-log.js';
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

/** The pattern Fastify matched, for metrics (`/payments/:id`, with its prefix); undefined without one. */
function fastifyRouteTemplate(request: FastifyRequest): string | undefined {
  return (
    (request.routeOptions as { url?: string } | undefined)?.url ??
    (request as unknown as { routerPath?: string }).routerPath
  );
}

/** A handler: Fastify's request and the idempotency context; returns the response to send (and store). */
export type FastifyIdempotentHandler<DB, Tx = Transaction<DB>> = (
  request: FastifyRequest,
  context: IdempotencyContext<DB, Tx>,
) => Promise<IdempotentResponseInit>;

/** Whether the reply has been sent, or its head written, by someone else than the adapter (the handler). */
function started(reply: FastifyReply): boolean {
  return reply.sent || reply.raw.headersSent;
}

/**
 * Wraps `handler` as a Fastify route handler. Errors reach Fastify's error handler after the key is released
 * (a write Fastify cannot make, too: it answers 500 itself). The handler returns its response and does not call
 * `reply.send` itself: a send before the response is stored is refused (`ResponseAlreadySentError`: rolled
 * back, key released); one after the commit is logged and nothing more is sent.
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
        routeTemplate: fastifyRouteTemplate(request),
        query: start < 0 ? '' : request.url.slice(start + 1),
        headers: requestHeaders(request.raw, request.headers),
        body: request.body,
        responseStarted: () => started(reply),
        native: request,
      },
      (context) => handler(request, context),
      options,
    );
    if (started(reply)) {
      safeLog(
        keys.config.logger,
        'error',
        { status: result.status },
        'idempotency keys: the handler sent the reply itself; return the response instead, so that what the client receives is what is stored and replayed',
      );
      if (!reply.raw.writableEnded) reply.raw.destroy();
      return reply;
    }
    return reply.code(result.status).headers(result.headers).send(result.body);
  };
}
