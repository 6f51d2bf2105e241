// The inbox's columns after its key, each named once here with its definition: the tables' DDL
// (inbox-schema.ts), the state machine's writes (inbox-sql.ts) and every copy of a row between tables (the
// upgrade from version 1, the move of a plain inbox to partitions: partitions/) are built from these lists, so
// a column added here reaches each of them. This file imports nothing, so the schema and the partitioned layout
// can both import it.

/** The hot row's columns after the key, in table order, with their definitions (inbox-schema.ts's `hotTable`). */
const HOT = [
  ['status', 'text NOT NULL'],
  ['fingerprint', 'text'],
  ['attempts', 'integer NOT NULL DEFAULT 0'],
  ['started_attempts', 'integer'],
  ['changed_at', 'timestamptz DEFAULT now()'],
  ['expires_at', 'timestamptz NOT NULL'],
] as const;

/** The details row's columns after the key, in table order, with their definitions. */
const DETAILS = [
  ['received_at', 'timestamptz NOT NULL'],
  ['message_timestamp', 'timestamptz'],
  ['available_at', 'timestamptz'],
  ['lease_token', 'uuid'],
  ['locked_until', 'timestamptz'],
  ['last_error', 'jsonb'],
  ['first_failure_at', 'timestamptz'],
  ['last_failure_at', 'timestamptz'],
  ['dead_letter_reason', 'text'],
  ['dead_lettered_at', 'timestamptz'],
  ['replay_count', 'integer NOT NULL DEFAULT 0'],
  ['last_replay_id', 'text'],
  ['claimed_from', 'text'],
] as const;

export type HotColumn = (typeof HOT)[number][0];
export type DetailColumn = (typeof DETAILS)[number][0];

/** The hot row's columns after the key, in table order. */
export const HOT_COLUMNS: readonly HotColumn[] = HOT.map(([name]) => name);

/** The details columns after the key, in table order. */
export const DETAIL_COLUMNS: readonly DetailColumn[] = DETAILS.map(([name]) => name);

/** `columns` as `h.a, h.b, …` (`alias` default `h`), or unqualified without an alias. */
export function columnList(columns: readonly string[], alias?: string): string {
  return columns.map((c) => (alias === undefined ? c : `${alias}.${c}`)).join(', ');
}

/** The DDL lines of the hot row's columns (`  name  type,` each, names padded to `width`). */
export function hotColumnDefinitions(width: number): string {
  return definitions(HOT, width);
}

/** The DDL lines of the details columns (`  name  type,` each, names padded to `width`). */
export function detailColumnDefinitions(width: number): string {
  return definitions(DETAILS, width);
}

function definitions(columns: readonly (readonly [string, string])[], width: number): string {
  return columns.map(([name, definition]) => `  ${name.padEnd(width)}${definition},`).join('\n');
}
