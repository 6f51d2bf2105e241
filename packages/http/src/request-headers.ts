// The request headers an adapter hands to `begin`: Node's, except that repeated Idempotency-Key headers stay
// apart. Node joins repeats of a header it does not know into one `a, b`, which is itself a valid key (a third
// one, neither the client's first nor its second); `begin` answers several keys with 400 instead.

import type { IncomingMessage } from 'node:http';
import type { IdempotentRequest } from './idempotent-request.js';

/**
 * `headers` (default `request.headers`; Fastify passes its own view), with `idempotency-key` as the list of its
 * values when the request repeats that header (read from `request.headersDistinct`, which an HTTP/2
 * compatibility request may lack). A custom adapter passes this as `IdempotentRequest.headers`.
 *
 * @example
 * await runIdempotent(keys, { method, route, headers: requestHeaders(req), body, native: req }, handler);
 */
export function requestHeaders(
  request: IncomingMessage,
  headers: IdempotentRequest['headers'] = request.headers,
): IdempotentRequest['headers'] {
  const distinct = (request as Partial<Pick<IncomingMessage, 'headersDistinct'>>).headersDistinct;
  const keys = distinct?.['idempotency-key'];
  if (keys === undefined || keys.length < 2) return headers;
  return { ...headers, 'idempotency-key': keys };
}
