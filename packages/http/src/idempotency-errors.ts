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
