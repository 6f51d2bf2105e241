// Postgres' errors as the store reads them: the SQLSTATE in `code` (node-postgres' shape). Some data layers wrap
// the driver's error (Drizzle's DrizzleQueryError, Prisma's known request errors); the SQLSTATE is found where
// the library put it, so that a lock timeout is still `busy` and a refused COMMIT still a failed attempt.

import { sqlState } from '@inboxkit/core/postgres';

const ABORTED = 'the transaction was aborted by a failed statement: COMMIT committed nothing';

/** The SQLSTATE carried by `error`, its causes, or the fields where a library keeps the driver's code. */
export function findSqlState(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const state =
      sqlState(current) ??
      sqlState({ code: (current as { meta?: { code?: unknown } }).meta?.code }) ??
      originalCode(current);
    if (state !== undefined) return state;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Prisma's driver adapters keep the server's SQLSTATE as `originalCode` (of a DriverAdapterError's cause). */
function originalCode(error: object): string | undefined {
  return sqlState({ code: (error as { originalCode?: unknown }).originalCode });
}

/** `error` itself when it carries its SQLSTATE as `code`; else an error that does, caused by it; else `error`. */
export function postgresError(error: unknown): unknown {
  if (sqlState(error) !== undefined) return error;
  const state = findSqlState(error);
  if (state === undefined) return error;
  const message = error instanceof Error ? error.message : String(error);
  return Object.assign(new Error(message, { cause: error }), { code: state });
}

/** What a seam rejects with when Postgres rolled back a COMMIT because the transaction had been aborted. */
export function abortedTransactionError(): Error {
  return Object.assign(new Error(ABORTED), { code: '25P02' });
}
