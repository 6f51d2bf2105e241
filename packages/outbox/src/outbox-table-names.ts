// The schema-qualified name of the outbox table and its derived names, validated so no SQL can travel through an
// identifier, and always quoted (the same rules as the inbox's names).

import { ConfigurationError } from '@inboxkit/core';

/** Where the outbox lives. */
export interface OutboxTableOptions {
  /** Schema of the outbox table. Default is `inboxkit`. */
  readonly schema?: string;
  /** The outbox table. Default is `outbox`. */
  readonly table?: string;
}

/** Validated names, and their quoted, schema-qualified forms for SQL. */
export interface OutboxTableNames {
  readonly schema: string;
  readonly table: string;
  /** `"schema"."table"` */
  readonly qualifiedTable: string;
  /** The LISTEN/NOTIFY channel the relay wakes on: `schema.table`, quoted when used as an identifier. */
  readonly channel: string;
  /** Quotes a name derived from the table (an index or constraint name). */
  derived(suffix: string): string;
}

/** Letters, digits and underscores, not starting with a digit, at most 63 bytes (Postgres' NAMEDATALEN). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The longest suffix added to the table name. */
const LONGEST_SUFFIX = '_undispatched_idx'.length;

function check(name: unknown, option: string): string {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new ConfigurationError(
      `${option} must be a plain identifier (letters, digits and _, not starting with a digit, at most 63 characters), got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/**
 * Validates the options and fills in the defaults. Throws a `ConfigurationError`.
 *
 * @example
 * resolveOutboxTableNames({ schema: 'app' }).qualifiedTable // '"app"."outbox"'
 */
export function resolveOutboxTableNames(options: OutboxTableOptions = {}): OutboxTableNames {
  const schema = check(options.schema ?? 'inboxkit', 'schema');
  const table = check(options.table ?? 'outbox', 'table');
  if (table.length + LONGEST_SUFFIX > 63) {
    throw new ConfigurationError(`table must be at most ${63 - LONGEST_SUFFIX} characters so its index names fit in 63, got ${table.length}`);
  }
  return Object.freeze({
    schema,
    table,
    qualifiedTable: `"${schema}"."${table}"`,
    channel: `${schema}.${table}`,
    derived: (suffix: string) => `"${check(`${table}${suffix}`, 'derived name')}"`,
  });
}
