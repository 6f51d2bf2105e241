// The names of the partitions of a partitioned inbox (layout `daily-partitions`): one per UTC day for the hot
// table and for its details (`<table>_p20261203`, `<table>_details_p20261203`), one for messages without a
// timestamp (`<table>_undated`, day `infinity`), and a default one for days that have no partition of their
// own (`<table>_default`); and, after the move of a populated plain inbox, the plain tables renamed
// (`<table>_legacy`, `<table>_details_legacy`) until every row in them expired.

import type { InboxTableNames } from '../inbox-table-names.js';

/** The partitions of one day and the fixed ones, as identifiers and schema-qualified SQL. */
export interface PartitionNames {
  /** `<table>_p`: the prefix of a day's hot partition, followed by `YYYYMMDD`. */
  readonly dayPrefix: string;
  /** `<table>_details_p`: the prefix of a day's details partition. */
  readonly detailsDayPrefix: string;
  readonly undated: string;
  readonly detailsUndated: string;
  readonly defaultPartition: string;
  readonly detailsDefault: string;
  /** `<table>_legacy` / `<table>_details_legacy`: a populated plain inbox, kept while it still deduplicates. */
  readonly legacy: string;
  readonly detailsLegacy: string;
  /** `"schema"."name"` */
  qualified(name: string): string;
}

export function partitionNames(n: InboxTableNames): PartitionNames {
  return Object.freeze({
    dayPrefix: `${n.table}_p`,
    detailsDayPrefix: `${n.detailsTable}_p`,
    undated: `${n.table}_undated`,
    detailsUndated: `${n.detailsTable}_undated`,
    defaultPartition: `${n.table}_default`,
    detailsDefault: `${n.detailsTable}_default`,
    legacy: `${n.table}_legacy`,
    detailsLegacy: `${n.detailsTable}_legacy`,
    qualified: (name: string) => `"${n.schema}"."${name}"`,
  });
}

/** `YYYYMMDD` of a UTC day given as `YYYY-MM-DD`. */
export function daySuffix(day: string): string {
  return day.replaceAll('-', '');
}
