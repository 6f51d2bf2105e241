// Where the idempotency-key table lives: validated, quoted names (core's rules for identifiers), defaults
// schema `inboxkit`, table `idempotency_key`.

import { resolveInboxTableNames, type InboxTableNames } from '@inboxkit/core/postgres';

/** Where the idempotency keys live. */
export interface IdempotencyKeyTableOptions {
  /** Schema of the table. Default is `inboxkit` (the inbox's). */
  readonly schema?: string;
  /** The table. Default is `idempotency_key`. */
  readonly table?: string;
}

/**
 * Validates the names and fills in the defaults. Throws a `ConfigurationError` for anything but a plain
 * identifier.
 *
 * @example
 * resolveIdempotencyKeyTableNames({ schema: 'app' }).qualifiedTable; // "app"."idempotency_key"
 */
export function resolveIdempotencyKeyTableNames(options: IdempotencyKeyTableOptions = {}): InboxTableNames {
  return resolveInboxTableNames({ schema: options.schema, table: options.table ?? 'idempotency_key' });
}
