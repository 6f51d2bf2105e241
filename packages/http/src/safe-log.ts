// The HTTP layer's calls to the application's logger: best effort, since a logger that throws (a serializer
// meeting a cyclic error, a closed destination) must not change the answer to a request.

import type { Logger } from '@inboxkit/core';

/** Calls `logger[level]`; does nothing without a logger, and ignores a logger that throws. */
export function safeLog(logger: Logger | undefined, level: 'warn' | 'error', obj: object, msg: string): void {
  try {
    logger?.[level](obj, msg);
  } catch {
    // Logging is best effort.
  }
}
