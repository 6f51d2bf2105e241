// inboxkit's pino-style Logger over Nest's Logger, so the library's lines join the application's log.

import { Logger as NestLogger } from '@nestjs/common';
import type { Logger } from '@inboxkit/core';

function line(obj: object, msg: string | undefined): string {
  const fields = JSON.stringify(obj, (_key, value: unknown) =>
    value instanceof Error ? { name: value.name, message: value.message } : value,
  );
  return fields === '{}' ? (msg ?? '') : `${msg ?? ''} ${fields}`;
}

/**
 * A pino-compatible `Logger` writing through Nest's `Logger` with the given context (the default logger of
 * `InboxkitModule`).
 *
 * @example
 * InboxkitModule.forRoot({ seam, logger: nestLogger('Payments') });
 */
export function nestLogger(context = 'Inboxkit'): Logger {
  const logger = new NestLogger(context);
  return {
    debug: (obj, msg) => logger.debug(line(obj, msg)),
    info: (obj, msg) => logger.log(line(obj, msg)),
    warn: (obj, msg) => logger.warn(line(obj, msg)),
    error: (obj, msg) => logger.error(line(obj, msg)),
  };
}
