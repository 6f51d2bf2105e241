// The batched pruner's statements (`prune()`), over the tables it deletes from: the plain table, or in the
// partitioned layout only the partitions that are never dropped whole — the undated one, and the default one
// that holds days without a partition of their own. A day's partition is dropped whole instead
// (partitioned-schema.ts), so deleting in it would be the WAL the layout exists to avoid.

import type { InboxTableNames } from '../inbox-table-names.js';
import { partitionNames } from './partition-names.js';

/** Parameters of both: `$1` the prune lock key, `$2` the consumer or NULL; of `batch`, `$3` the batch size. */
export interface PruneStatements {
  /** An expression counting the expired completed rows. */
  readonly count: string;
  /**
   * One batch: at most `$3` expired completed rows (and their details) deleted, the earlier tables first, under
   * the transaction's prune lock. One row: `locked`, `deleted`.
   */
  readonly batch: string;
}

interface Target {
  readonly hot: string;
  readonly details: string;
}

function targets(n: InboxTableNames): readonly Target[] {
  if (n.layout === 'table') return [{ hot: n.qualifiedTable, details: n.qualifiedDetailsTable }];
  const p = partitionNames(n);
  return [
    { hot: p.qualified(p.undated), details: p.qualified(p.detailsUndated) },
    { hot: p.qualified(p.defaultPartition), details: p.qualified(p.detailsDefault) },
  ];
}

const EXPIRED = `h.status = 'completed' AND h.expires_at < now() AND ($2::text IS NULL OR h.consumer = $2::text)`;

export function pruneStatements(n: InboxTableNames): PruneStatements {
  const ts = targets(n);
  const count = ts.map((t) => `(SELECT count(*)::int FROM ${t.hot} h WHERE ${EXPIRED})`).join(' + ');
  const ctes = ts.map((t, i) => {
    const taken = ts.slice(0, i).map((_t, j) => ` - (SELECT count(*)::int FROM doomed${j})`).join('');
    return `doomed${i} AS (
  SELECT h.consumer, h.message_id FROM ${t.hot} h, lock
  WHERE lock.locked AND ${EXPIRED} LIMIT greatest(0, $3::int${taken}) FOR UPDATE OF h SKIP LOCKED),
gone${i} AS (
  DELETE FROM ${t.hot} AS t USING doomed${i} AS doomed
  WHERE t.consumer = doomed.consumer AND t.message_id = doomed.message_id AND t.status = 'completed'
  RETURNING t.consumer, t.message_id),
details${i} AS (
  DELETE FROM ${t.details} AS t USING gone${i} AS gone WHERE t.consumer = gone.consumer AND t.message_id = gone.message_id)`;
  });
  const deleted = ts.map((_t, i) => `(SELECT count(*)::int FROM gone${i})`).join(' + ');
  return {
    count,
    batch: `WITH lock AS (SELECT pg_try_advisory_xact_lock($1::bigint) AS locked),
${ctes.join(',\n')}
SELECT (SELECT locked FROM lock) AS locked, ${deleted} AS deleted`,
  };
}
