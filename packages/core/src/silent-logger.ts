// The default logger: discards everything. Pass a pino instance (or anything with the same four methods) to log.

import type { Logger } from './consumer-types.js';

const noop = (): void => {};

/** A logger that logs nothing. */
export const silentLogger: Logger = Object.freeze({ debug: noop, info: noop, warn: noop, error: noop });
