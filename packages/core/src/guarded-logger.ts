// The consumer logs on every failure path; a logger that throws there (a serializer meeting a cyclic error,
// a closed destination) must not turn a counted attempt into an endless retry. Core therefore calls the
// application's logger through this guard, which drops what the logger could not take.

import type { Logger } from './consumer-types.js';

/** `logger` with every method made unable to throw (a throwing call logs nothing). */
export function guardedLogger(logger: Logger): Logger {
  const guard =
    (level: keyof Logger) =>
    (obj: object, msg?: string): void => {
      try {
        logger[level](obj, msg);
      } catch {
        // Logging is best effort; the outcome must not depend on it.
      }
    };
  return Object.freeze({
    debug: guard('debug'),
    info: guard('info'),
    warn: guard('warn'),
    error: guard('error'),
  });
}
