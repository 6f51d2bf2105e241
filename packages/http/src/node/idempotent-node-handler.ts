// idempotentNodeHandler(): the Idempotency-Key protocol around a plain node:http request listener.

import type { Transaction } from 'kysely';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isInboxkitError } from '@inboxkit/core';
import type { IdempotencyKeys } from '../idempotency-keys.js';
import { problemResponse, type HttpResponse, type IdempotentResponseInit } from '../http-response.js';
import { requestHeaders } from '../request-headers.js';
import { requestPath } from '../request-path.js';
import { sendResponse, writeHead } from '../send-response.js';
import { runIdempotent, type IdempotencyContext, type IdempotentRouteOptions } from '../run-idempotent.js';

/** Options of `idempotentNodeHandler`. */
export interface NodeHandlerOptions extends IdempotentRouteOptions {
  /** Largest request body read; a larger one gets 413. Default is 1 MiB. */
  readonly maxBodyBytes?: number;
  /**
   * The route keys are scoped to. Default is `requestPath(request.url)`: the path without query, in one
   * spelling (no empty or dot segments, unreserved escapes decoded), case kept. An application whose own dispatch
   * ignores case passes `(req) => requestPath(req.url ?? '/').toLowerCase()`.
   */
  readonly route?: (request: IncomingMessage) => string;
  /**
   * The route template for metrics and `onOutcome` (`/payments/:id`): a few fixed strings, never the raw path.
   * Default is `'unmatched'` (node:http has no router to name the route).
   *
   * @example
   * idempotentNodeHandler(keys, handler, { routeTemplate: () => '/payments' });
   */
  readonly routeTemplate?: (request: IncomingMessage) => string;
}

/** A handler: the request, its parsed body (JSON when the content type says so, else bytes) and the context. */
export type NodeIdempotentHandler<DB, Tx = Transaction<DB>> = (
  request: IncomingMessage,
  body: unknown,
  context: IdempotencyContext<DB, Tx>,
) => Promise<IdempotentResponseInit>;

class BodyError extends Error {
  constructor(readonly response: HttpResponse) {
    super(response.status === 413 ? 'request body too large' : 'request body unreadable');
  }
}

async function readBody(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      throw new BodyError(
        problemResponse(413, 'Request body too large', `The request body exceeds ${maxBytes} bytes.`),
      );
    }
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  const bytes = Buffer.concat(chunks);
  if (!/\bjson\b/i.test(request.headers['content-type'] ?? '')) return bytes;
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new BodyError(problemResponse(400, 'Invalid JSON', 'The request body is not valid JSON.'));
  }
}

/** The query of a request target, without fragment (`''` when none). */
function queryOf(url: string): string {
  const start = url.indexOf('?');
  if (start < 0) return '';
  const hash = url.indexOf('#', start);
  return url.slice(start + 1, hash < 0 ? undefined : hash);
}

/** Writes a response (exported for tests and custom servers); throws what `writeHead` throws. */
export function writeHttpResponse(response: ServerResponse, value: HttpResponse): void {
  writeHead(response, value);
}

/**
 * Wraps `handler` as a node:http request listener. A handler error releases the key and answers 500 (with the
 * message only for inboxkit's own errors, never the handler's). The handler returns its response and does not
 * write to `response` itself: a write before the response is stored is refused (`ResponseAlreadySentError`:
 * rolled back, key released, an unfinished response cut off); one after the commit is logged. Writing never
 * throws out of the listener: a response Node refuses is answered 500.
 *
 * @example
 * http.createServer(idempotentNodeHandler(keys, async (req, body, context) =>
 *   context.transaction(async (tx) => ({ status: 201, body: await charge(tx, body) }))));
 */
export function idempotentNodeHandler<DB, Tx = Transaction<DB>>(
  keys: IdempotencyKeys<DB, IncomingMessage, Tx>,
  handler: NodeIdempotentHandler<DB, Tx>,
  options: NodeHandlerOptions = {},
): (request: IncomingMessage, response: ServerResponse) => void {
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const logger = keys.config.logger;
  return (request, response) => {
    void (async () => {
      let result: HttpResponse;
      try {
        const body = await readBody(request, maxBodyBytes);
        const url = request.url ?? '/';
        const route = options.route?.(request) ?? requestPath(url);
        result = await runIdempotent(
          keys,
          {
            method: request.method ?? 'GET',
            route,
            routeTemplate: options.routeTemplate?.(request),
            query: queryOf(url),
            headers: requestHeaders(request),
            body,
            responseStarted: () => response.headersSent,
            native: request,
          },
          (context) => handler(request, body, context),
          options,
        );
      } catch (error) {
        result =
          error instanceof BodyError
            ? error.response
            : problemResponse(
                500,
                'Internal Server Error',
                // inboxkit's own errors say what to change (e.g. maxResponseBytes); anything else may hold secrets.
                isInboxkitError(error)
                  ? error.message
                  : 'The request failed; the Idempotency-Key was released, so it can be retried.',
              );
      }
      sendResponse(response, result, writeHead, logger);
    })();
  };
}
