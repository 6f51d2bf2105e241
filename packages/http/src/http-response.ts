// The response shapes the HTTP layer stores and writes: what a handler returns (`IdempotentResponseInit`) and
// its normalized, byte-exact form (`HttpResponse`).

/** What a handler returns. A plain object or array body is written as JSON. */
export interface IdempotentResponseInit {
  /** The HTTP status, 100–599. */
  readonly status: number;
  /** Response headers (names case-insensitive). Only the allow-listed ones are stored for replays. */
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
 * Normalizes a handler's response: header names lower-cased, strings as UTF-8, JSON values serialized with
 * `content-type: application/json` unless one was given.
 *
 * @example
 * toHttpResponse({ status: 201, body: { id: 1 } }).body.toString(); // '{"id":1}'
 */
export function toHttpResponse(init: IdempotentResponseInit): HttpResponse {
  if (!Number.isInteger(init.status) || init.status < 100 || init.status > 599) {
    throw new TypeError(`response status must be an integer in 100–599, got ${String(init.status)}`);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(init.headers ?? {})) headers[name.toLowerCase()] = String(value);
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
