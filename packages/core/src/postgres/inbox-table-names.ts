// The schema-qualified names of the inbox tables, their indexes and functions, validated so no SQL can travel
// through an identifier, and always quoted.

import { ConfigurationError } from '../errors.js';

/** Where the inbox lives. */
export interface InboxTableOptions {
  /** Schema of the inbox tables. Default is `inboxkit`. */
  readonly schema?: string;
  /** The inbox table. Default is `inbox`. Its side table is this name + `_details`. */
  readonly table?: string;
  /** The replay audit table. Default is the inbox table's name + `_replays`. */
  readonly replayTable?: string;
  /**
   * How the inbox's rows are stored: `table`, one table pruned by batched deletes, or `daily-partitions`, range
   * partitions by the UTC day of the message's own timestamp, expired by dropping a whole day (see
   * `maintainInboxPartitions`). The store and its migration must be given the same layout. Default is `table`.
   */
  readonly layout?: InboxLayout;
}

/** How the inbox's rows are stored (see `InboxTableOptions.layout`). */
export type InboxLayout = 'table' | 'daily-partitions';

/** Validated names, and their quoted, schema-qualified forms for SQL. */
export interface InboxTableNames {
  readonly layout: InboxLayout;
  readonly schema: string;
  readonly table: string;
  readonly replayTable: string;
  /** The side table of the rows' rare-path state (failures, dead letters, leases, replays). */
  readonly detailsTable: string;
  /** `"schema"."table"` */
  readonly qualifiedTable: string;
  /** `"schema"."replay_table"` */
  readonly qualifiedReplayTable: string;
  /** `"schema"."table_details"` */
  readonly qualifiedDetailsTable: string;
  /** Quotes a name derived from the table (an index or constraint name). */
  derived(suffix: string): string;
  /** `"schema"."table<suffix>"`: a function of this inbox (`_claim`, `_fail` …). */
  qualified(suffix: string): string;
}

/** Letters, digits and underscores, not starting with a digit, at most 63 bytes (Postgres' NAMEDATALEN). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function quote(name: string): string {
  return `"${name}"`;
}

function check(name: unknown, option: string): string {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new ConfigurationError(
      `${option} must be a plain identifier (letters, digits and _, not starting with a digit, at most 63 characters), got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** The longest suffix added to the table name (`_expires_at_idx`, `_replays_message_idx` …). */
const LONGEST_SUFFIX = '_replays_message_idx'.length;

/** Validates the options and fills in the defaults. Throws a `ConfigurationError`. */
export function resolveInboxTableNames(options: InboxTableOptions = {}): InboxTableNames {
  const schema = check(options.schema ?? 'inboxkit', 'schema');
  const table = check(options.table ?? 'inbox', 'table');
  if (table.length + LONGEST_SUFFIX > 63) {
    throw new ConfigurationError(`table must be at most ${63 - LONGEST_SUFFIX} characters so its index names fit in 63, got ${table.length}`);
  }
  const replayTable = check(options.replayTable ?? `${table}_replays`, 'replayTable');
  const detailsTable = `${table}_details`;
  const layout = options.layout ?? 'table';
  if (layout !== 'table' && layout !== 'daily-partitions') {
    throw new ConfigurationError(`layout must be 'table' or 'daily-partitions', got ${JSON.stringify(layout)}`);
  }
  if (replayTable === table || replayTable === detailsTable) throw new ConfigurationError('replayTable must differ from table and its _details table');
  return Object.freeze({
    layout,
    schema,
    table,
    replayTable,
    detailsTable,
    qualifiedTable: `${quote(schema)}.${quote(table)}`,
    qualifiedReplayTable: `${quote(schema)}.${quote(replayTable)}`,
    qualifiedDetailsTable: `${quote(schema)}.${quote(detailsTable)}`,
    derived: (suffix: string) => quote(check(`${table}${suffix}`, 'derived name')),
    qualified: (suffix: string) => `${quote(schema)}.${quote(check(`${table}${suffix}`, 'derived name'))}`,
  });
}
