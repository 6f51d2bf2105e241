// The response shapes the HTTP layer stores and writes: what a handler returns (`IdempotentResponseInit`) and
// its normalized, byte-exact form (`HttpResponse`), checked against what Node can send before anything stores it.

import { validateHeaderName, validateHeaderValue } from 'node:http';
import { InvalidResponseError } from './idempotency-errors.js';

/** What a handler returns. A plain object or array body is written as JSON. */
export interface IdempotentResponseInit {
  /** The HTTP status, 100–599. */
  readonly status: number;
  /**
   * Response headers (names case-insensitive). Only the allow-listed ones are stored for replays. Names must be
   * HTTP tokens and values may hold no CR, LF or NUL and no character above U+00FF (Node refuses them): send a
   * non-ASCII `Location` percent-encoded (`encodeURI`), else the response is refused with 500 before anything
   * is stored.
   */
  readonly headers?: Readonly<Record<string, string>>;
  /** A string (UTF-8), bytes, or a JSON value. Default is an empty body. */
  readonly body?: unknown;
}

/** A response ready to be written: lower-case header names and the exact body bytes. */
export interface HttpResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/**
 * Why Node would refuse to send this header (its error message), or undefined when it can be sent. The same
 * checks `res.setHeader`/`res.writeHead` make (`validateHeaderName`, `validateHeaderValue` of node:http), and
 * `Trailer`, which `writeHead` refuses for a body of known length (`ERR_HTTP_TRAILER_INVALID`): the adapters
 * always send one.
 */
export function unsendableHeaderReason(name: string, value: string): string | undefined {
  try {
    validateHeaderName(name);
    validateHeaderValue(name, value);
    if (name.toLowerCase() === 'trailer') {
      return 'Trailers are invalid with this transfer encoding: the response body is sent with a known length';
    }
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * Normalizes a handler's response: header names lower-cased, strings as UTF-8, JSON values serialized with
 * `content-type: application/json` unless one was given. Throws `InvalidResponseError`, naming the header, for
 * a status outside 100–599 or a header Node cannot send, so nothing unsendable is ever stored.
 *
 * @example
 * toHttpResponse({ status: 201, body: { id: 1 } }).body.toString(); // '{"id":1}'
 */
export function toHttpResponse(init: IdempotentResponseInit): HttpResponse {
  if (!Number.isInteger(init.status) || init.status < 100 || init.status > 599) {
    throw new InvalidResponseError(
      `response status must be an integer in 100–599, got ${String(init.status)}; nothing was stored and the key was released`,
    );
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(init.headers ?? {})) {
    const text = String(value);
    const reason = unsendableHeaderReason(name, text);
    if (reason !== undefined) {
      throw new InvalidResponseError(
        `response header ${JSON.stringify(name)} cannot be sent (${reason}); nothing was stored and the key was released: percent-encode the value (encodeURI) or leave the header out`,
      );
    }
    headers[name.toLowerCase()] = text;
  }
  let body: Buffer;
  if (init.body === undefined || init.body === null) body = Buffer.alloc(0);
  else if (typeof init.body === 'string') body = Buffer.from(init.body, 'utf8');
  else if (init.body instanceof Uint8Array) body = Buffer.from(init.body);
  else {
    body = Buffer.from(JSON.stringify(init.body), 'utf8');
    headers['content-type'] ??= 'application/json; charset=utf-8';
  }
  return { status: init.status, headers, body };
}

/** A problem-details (RFC 9457) response for the middleware's own answers (400, 409, 422 …). */
export function problemResponse(
  status: number,
  title: string,
  detail: string,
  headers: Record<string, string> = {},
): HttpResponse {
  return {
    status,
    headers: { 'content-type': 'application/problem+json', ...headers },
    body: Buffer.from(JSON.stringify({ status, title, detail }), 'utf8'),
  };
}
