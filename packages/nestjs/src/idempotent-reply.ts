// What an @Idempotent() handler returns when the route's status is not the one to send, or headers go with it.

const BRAND = Symbol.for('inboxkit.nestjs.idempotent-reply');

/** A response with its own status and headers, stored and replayed as it is. */
export interface IdempotentReply {
  readonly status: number;
  /** Allow-listed headers (content-type, content-language, location, etag by default) are stored for replays. */
  readonly headers?: Readonly<Record<string, string>>;
  /** A string (UTF-8), bytes, or a JSON value. Default is an empty body. */
  readonly body?: unknown;
}

/**
 * Marks a handler's result as a whole response: its status and headers instead of the route's. Any other result
 * of an `@Idempotent()` handler is the body, sent with the route's status (`@HttpCode`, else 201 for POST, 200
 * for the rest). Throws a `TypeError` for a status that is not an integer.
 *
 * @example
 * return idempotentReply({ status: 202, headers: { location: `/payments/${id}` }, body: { id } });
 */
export function idempotentReply(reply: IdempotentReply): IdempotentReply {
  if (!Number.isInteger(reply.status))
    throw new TypeError(`idempotentReply: status must be an integer, got ${String(reply.status)}`);
  return Object.freeze(Object.defineProperty({ ...reply }, BRAND, { value: true }));
}

/** True for what `idempotentReply` made. */
export function isIdempotentReply(value: unknown): value is IdempotentReply {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}
