// Turns "the inbox table does not exist" into a ConfigurationError that says what to do, instead of a raw
// Postgres error.

import { ConfigurationError } from '@inboxkit/core';

import type { ConnectionSettings } from '../settings/connection-settings.js';

/** Runs `work`; a Postgres `undefined_table` (42P01) or `invalid_schema_name` (3F000) becomes a ConfigurationError. */
export async function withInboxTable<T>(settings: ConnectionSettings, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (sqlStates(error).some((code) => code === '42P01' || code === '3F000')) {
      throw new ConfigurationError(
        `the inbox table ${settings.schema}.${settings.table} does not exist: run \`inboxkit migrate\`, or pass the right --schema/--table`,
        { cause: error },
      );
    }
    throw error;
  }
}

/** The SQLSTATE codes along the error's `cause` chain (core wraps driver errors). */
export function sqlStates(error: unknown): string[] {
  const codes: string[] = [];
  for (
    let e: unknown = error, depth = 0;
    typeof e === 'object' && e !== null && depth < 5;
    e = (e as { cause?: unknown }).cause, depth += 1
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
  }
  return codes;
}
