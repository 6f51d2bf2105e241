// Start-up work on the database (the schema migrations) waits for a Postgres that is down or restarting, as the
// consumers' start() waits for their broker: a process started during an outage would otherwise die in its
// migrations while its consumers would have waited. What no retry fixes (authentication, a missing database,
// permissions, a migration that fails in SQL) rejects at once; `startTimeoutMs` bounds the rest.

import type { Logger } from './consumer-types.js';
import { ConfigurationError } from './errors.js';
import { silentLogger } from './silent-logger.js';
import {
  errorChain,
  isProgrammerError,
  isTransientSocketError,
  retryStart,
  startRetryDelay,
  tlsFailure,
} from './start-retry.js';

/** How start-up work on the database retries while the database cannot be reached. */
export interface DatabaseStartRetryOptions {
  /**
   * How long to keep trying while the database cannot be reached (connection refused or reset, the server
   * starting up or shutting down, too many clients) before rejecting with a `StartTimeoutError`. Errors no
   * retry fixes (a refused login, a missing database, permissions, a migration that fails in SQL) reject at
   * once whatever this is. Default is `Infinity`, as the consumers' `startTimeoutMs`: a process started during
   * an outage waits for the database instead of exiting, and logs a warning per attempt. `0` tries once and
   * rejects with that attempt's own error (what a command-line tool wants).
   */
  readonly startTimeoutMs?: number;
  /**
   * The pause between attempts: doubling from `initialDelayMs` to `maxDelayMs`, with jitter (the consumers'
   * start-up backoff). Default is 500 ms up to 30,000 ms.
   */
  readonly startRetry?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  /** Receives a warning per failed attempt, with the next delay. Default is silent. */
  readonly logger?: Logger;
  /** Aborting it ends the wait: the call rejects with the signal's reason. Default is none. */
  readonly signal?: AbortSignal;
}

/**
 * SQLSTATEs of a server that is not (yet, or no longer) serving: 57P01 admin shutdown, 57P02 crash shutdown,
 * 57P03 cannot connect now (starting up, shutting down, in recovery), 53300 too many connections.
 */
const TRANSIENT_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * node-postgres's and pg-pool's own messages (fixed strings of the client, not the server's language) for a
 * connection that ended or never came up.
 */
const CLIENT_CONNECTION_LOST = /^(Connection terminated|timeout exceeded when trying to connect)/;

/**
 * True when `error` (or something in its `cause` chain) says the database cannot be reached right now: a
 * socket-level failure, a connection-exception SQLSTATE (class 08), a server starting up or shutting down,
 * too many clients, or the client's own report of a lost connection. False for everything else — a retry
 * does not fix a wrong password or a missing table.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  if (tlsFailure(error) !== undefined) return false;
  if (isTransientSocketError(error)) return true;
  return errorChain(error).some((e) => {
    if (typeof e !== 'object' || e === null || isProgrammerError(e)) return false;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (code.startsWith('08') || TRANSIENT_SQLSTATES.has(code))) return true;
    const message = (e as { message?: unknown }).message;
    return typeof message === 'string' && CLIENT_CONNECTION_LOST.test(message);
  });
}

function positiveMs(what: string, value: number | undefined, fallback: number): number {
  const ms = value ?? fallback;
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms <= 0) {
    throw new ConfigurationError(`${what} must be a positive number of ms, got ${String(value)}`);
  }
  return ms;
}

/**
 * Runs `attempt` until it succeeds, while its failures are transient (`isTransientDatabaseError`), with the
 * consumers' start-up policy. `what` names the caller in logs and errors (e.g. `migrateInbox`). Rejects with
 * the error itself when it is not transient, with a `StartTimeoutError` after `startTimeoutMs`, and with the
 * signal's reason when `signal` aborts.
 *
 * @example
 * await retryDatabaseStart('migrateInbox', () => runMigrations(db), { startTimeoutMs: 60_000, logger });
 */
export async function retryDatabaseStart<T>(
  what: string,
  attempt: () => Promise<T>,
  options: DatabaseStartRetryOptions = {},
): Promise<T> {
  if (options.startTimeoutMs === 0) return attempt();
  const timeoutMs = positiveMs(`${what} startTimeoutMs`, options.startTimeoutMs, Infinity);
  const initialMs = positiveMs(`${what} startRetry.initialDelayMs`, options.startRetry?.initialDelayMs, 500);
  const maxMs = positiveMs(
    `${what} startRetry.maxDelayMs`,
    options.startRetry?.maxDelayMs,
    Math.max(30_000, initialMs),
  );
  if (maxMs < initialMs) {
    throw new ConfigurationError(`${what} startRetry.maxDelayMs must be at least startRetry.initialDelayMs`);
  }
  const signal = options.signal ?? new AbortController().signal;
  const result = await retryStart({
    attempt,
    permanent: (error) => (isTransientDatabaseError(error) ? undefined : error),
    delayMs: (n) => startRetryDelay(n, initialMs, maxMs),
    timeoutMs,
    signal,
    abandon: () => undefined,
    logger: options.logger ?? silentLogger,
    what,
    context: {},
    service: 'the database',
  });
  if (result === undefined) throw signal.reason ?? new Error(`${what}: aborted`);
  return result.value;
}
