// `inboxkit doctor` on a partitioned inbox (layout `daily-partitions`): today's partition and at least one day
// ahead must exist, or messages land in the default partition (pruned by deletes, the cost the layout avoids)
// — the sign that partition maintenance (`inboxkit partitions`, startPartitionMaintenance) stopped running.

import { sql, type Kysely } from 'kysely';

import type { DoctorCheck } from './config-invariants.js';

const NAME = 'inbox partitions';

/** The check, or none when the inbox is a plain table. */
export async function checkPartitions(db: Kysely<unknown>, schema: string, table: string): Promise<DoctorCheck[]> {
  const qualified = `"${schema}"."${table}"`;
  const { rows } = await sql<{ kind: string | null; today: string; last: string | null; ahead: number | null; waiting: number | null }>`
    SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass(${qualified})) AS kind,
      (now() AT TIME ZONE 'UTC')::date::text AS today,
      max(to_date(substr(c.relname, ${table.length + 3}), 'YYYYMMDD'))::text AS last,
      (max(to_date(substr(c.relname, ${table.length + 3}), 'YYYYMMDD')) - (now() AT TIME ZONE 'UTC')::date)::int AS ahead,
      (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(${`"${schema}"."${table}_default"`}))::int AS waiting
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass(${qualified}) AND c.relname ~ ${`^${table}_p[0-9]{8}$`}`.execute(db);
  const r = rows[0];
  if (r?.kind !== 'p') return [];
  const fix = 'run `inboxkit partitions` now, and schedule it (cron) or call startPartitionMaintenance() in a service';
  if (r.last === null || r.ahead === null || r.ahead < 0) {
    return [{ name: NAME, status: 'fail', detail: `no partition for today (${r.today}): new messages go to the default partition`, fix }];
  }
  const defaults = r.waiting === null || r.waiting <= 0 ? '' : `; about ${r.waiting} rows in ${table}_default`;
  const detail = `days through ${r.last} (${r.ahead} ahead of ${r.today} UTC)${defaults}`;
  return r.ahead < 1 ? [{ name: NAME, status: 'warn', detail, fix }] : [{ name: NAME, status: 'ok', detail }];
}
