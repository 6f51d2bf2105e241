// The last step of the node:http and Express adapters: write the protocol's answer to Node's response without
// ever throwing. A throw there would escape every catch (the adapters answer from a callback) and end the
// process; a refused write is answered 500 instead, or the connection cut when the head is already out.

import type { ServerResponse } from 'node:http';
import type { Logger } from '@inboxkit/core';
import { problemResponse, type HttpResponse } from './http-response.js';
import { safeLog } from './safe-log.js';

/** Writes the head and body of `value` (framework-specific). */
export type ResponseWriter = (response: ServerResponse, value: HttpResponse) => void;

/** The node:http way: `writeHead` with the exact headers and a `content-length`, then the body. */
export function writeHead(response: ServerResponse, value: HttpResponse): void {
  response.writeHead(value.status, { ...value.headers, 'content-length': String(value.body.length) });
  response.end(value.body);
}

/**
 * Writes `value` with `write`, unless the handler wrote to the response itself (then nothing more is written,
 * the error is logged and an unfinished response is cut off, so the client does not take a part for the whole).
 * A write that throws is logged and answered 500 (or the connection cut); it never throws.
 */
export function sendResponse(
  response: ServerResponse,
  value: HttpResponse,
  write: ResponseWriter,
  logger: Logger | undefined,
): void {
  if (response.headersSent) {
    safeLog(
      logger,
      'error',
      { status: value.status },
      'idempotency keys: the handler wrote to the response itself; return the response instead, so that what the client receives is what is stored and replayed',
    );
    if (!response.writableEnded) response.destroy();
    return;
  }
  try {
    write(response, value);
  } catch (error) {
    safeLog(logger, 'error', { err: error }, 'idempotency keys: the response could not be written');
    if (response.headersSent) {
      response.destroy();
      return;
    }
    try {
      for (const name of response.getHeaderNames()) response.removeHeader(name);
      writeHead(
        response,
        problemResponse(
          500,
          'Response not sent',
          `The response could not be written: ${error instanceof Error ? error.message : String(error)}`,
        ),
      );
    } catch {
      response.destroy();
    }
  }
}
