// Errors of the HTTP layer, on core's hierarchy (code, retriable, a cross-install brand).

import { InboxkitError, type InboxkitErrorOptions } from '@inboxkit/core';

/**
 * The response is larger than `maxResponseBytes`, so it cannot be stored for replays. The handler's
 * transaction is rolled back and the key released; raise the limit or return less.
 */
export class ResponseTooLargeError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('RESPONSE_TOO_LARGE', message, false, options);
  }
}

/**
 * The handler's response cannot be sent: a header name or value Node refuses (a non-ASCII `Location`, a CR/LF),
 * or a status outside 100–599. Raised before anything is stored, so the handler's transaction rolls back and
 * the key is released; the adapters answer 500 with this message, which names the header.
 */
export class InvalidResponseError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('INVALID_RESPONSE', message, false, options);
  }
}

/**
 * The handler wrote to the framework's response itself (`res.headersSent`, Fastify `reply.sent`) instead of
 * returning the response, so what the client received cannot be stored for replays. Raised before anything is
 * stored: the handler's transaction rolls back and the key is released.
 */
export class ResponseAlreadySentError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('RESPONSE_ALREADY_SENT', message, false, options);
  }
}
