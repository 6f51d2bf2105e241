// Partition maintenance of a partitioned inbox (layout `daily-partitions`): makes the days ahead (and any day of
// the dedupe window that is missing), and drops the days wholly older than the window. Each day is one short
// transaction calling the schema's own functions (partitioned-schema.ts), so a crash leaves every day either
// done or not, and a rerun finishes the work. One step at a time across instances: each step takes a
// transaction-level advisory lock, and a run that finds it taken stops and answers `locked`.

import { createHash } from 'node:crypto';
import type { MeterProvider } from '@opentelemetry/api';
import { ConfigurationError } from '../../errors.js';
import { storeUnavailable } from '../inbox-inspection.js';
import { resolveInboxTableNames, type InboxTableNames, type InboxTableOptions } from '../inbox-table-names.js';
import { sqlState, type SqlSeam, type SqlStatement } from '../sql-seam.js';
import { countPartitionSteps } from './partition-metrics.js';
import type { PartitionStep } from './partition-step.js';
import { partitionNames } from './partition-names.js';

const DAY_MS = 86_400_000;

/** Options of `maintainInboxPartitions`. */
export interface PartitionMaintenanceOptions extends Omit<InboxTableOptions, 'layout'> {
  /** Days made ahead of today (UTC), so messages stamped a little ahead (clock skew) find theirs. Default is 3. */
  readonly aheadDays?: number;
  /**
   * The dedupe window: a day is dropped once its last instant is this long past. Set it to the largest
   * `dedupeWindowMs` of the consumers that share the inbox (a shorter one would drop days a consumer still
   * deduplicates against; a day whose completed rows have not all expired is kept anyway). Default is 7 days.
   */
  readonly dedupeWindowMs?: number;
  /**
   * The `lock_timeout` of each day's DDL. Adding and dropping a day need a short exclusive lock that waits for
   * running handler transactions and holds new claims back while it waits; past this the day is left for the
   * next run (`busy`). Default is 2,000 ms.
   */
  readonly lockTimeoutMs?: number;
  /** Only say what would be done: no day is made or dropped. Default is false. */
  readonly dryRun?: boolean;
  /** Called after each day's step, as it happens (for progress output). */
  readonly onStep?: (step: PartitionStep) => void;
  /**
   * Where each run's steps are counted (`inboxkit.partitions` by action, `inboxkit.partition_rows_moved`).
   * Default is the global MeterProvider (a no-op until the application registers an SDK).
   */
  readonly meterProvider?: MeterProvider;
}

export type { PartitionStep } from './partition-step.js';

/** What a run did. */
export interface PartitionMaintenanceResult {
  /** `done`; `locked` when another instance held the lock (the steps so far are listed); `dry-run`. */
  readonly status: 'done' | 'locked' | 'dry-run';
  /** The database's UTC day the run planned from. */
  readonly today: string;
  readonly steps: readonly PartitionStep[];
  /** The days with a partition after the run, oldest first. */
  readonly days: readonly string[];
  /**
   * The plain tables of a populated inbox moved to partitions (`<table>_legacy`): `none` (there are none),
   * `kept` (a completed row in them is still inside its window), `retired` (their open rows moved into the
   * partitions, `movedRows`, and the tables dropped), `busy` (the lock timeout passed).
   */
  readonly legacy: { readonly status: 'none' | 'kept' | 'retired' | 'busy'; readonly movedRows: number };
}

/**
 * `maintainInboxPartitions` over a seam (the public function, ../../kysely/partition-maintenance.ts, resolves
 * `{ db }` or `{ seam }` to one).
 */
export async function maintainPartitionsOverSeam(
  seam: SqlSeam<unknown>,
  options: PartitionMaintenanceOptions = {},
): Promise<PartitionMaintenanceResult> {
  const settings = resolve(options);
  const names = resolveInboxTableNames({ ...options, layout: 'daily-partitions' });
  const plan = await planOf(seam, names, settings);
  const steps: PartitionStep[] = [];
  const report = (step: PartitionStep): void => {
    steps.push(step);
    options.onStep?.(step);
  };
  const none = { status: 'none', movedRows: 0 } as const;
  if (settings.dryRun) {
    for (const day of plan.create) report({ action: 'would-create', day });
    for (const day of plan.drop) report({ action: 'would-drop', day, ...(await dropPreview(seam, names, day)) });
    return { status: 'dry-run', today: plan.today, steps, days: plan.days, legacy: plan.legacy ? { status: 'kept', movedRows: 0 } : none };
  }
  const key = partitionLockKey(names).toString();
  const work = [...plan.create.map((day) => ({ day, change: 'create' as const })), ...plan.drop.map((day) => ({ day, change: 'drop' as const }))];
  let status: 'done' | 'locked' = 'done';
  let legacy: PartitionMaintenanceResult['legacy'] = none;
  try {
    for (const { day, change } of work) {
      const step = await runStep(seam, names, key, settings, day, change);
      if (step === 'locked') {
        status = 'locked';
        break;
      }
      if (step !== undefined) report(step);
    }
    if (status === 'done' && plan.legacy) {
      const answer = await inStep(seam, key, settings, { sql: `SELECT ${names.qualified('_retire_legacy')}() AS answer`, parameters: [] });
      if (answer === 'locked') status = 'locked';
      else {
        const [verdict, moved] = answer.split(':');
        legacy = answer === 'busy' ? { status: 'busy', movedRows: 0 } : verdict === 'retired' ? { status: 'retired', movedRows: Number(moved ?? 0) } : verdict === 'absent' ? none : { status: 'kept', movedRows: 0 };
      }
    }
  } finally {
    countPartitionSteps(names.qualifiedTable, steps, options.meterProvider);
  }
  return { status, today: plan.today, steps, days: await daysOf(seam, names), legacy };
}

/**
 * The advisory lock key of partition maintenance: a step holds it for its transaction.
 * `SELECT pg_advisory_lock(key)` from a session pauses maintenance until it unlocks.
 */
export function partitionLockKey(options: InboxTableOptions | InboxTableNames = {}): bigint {
  const names = 'qualifiedTable' in options ? options : resolveInboxTableNames(options);
  return createHash('sha256').update(`inboxkit:partitions:${names.qualifiedTable}`).digest().readBigInt64BE(0);
}

interface Settings {
  readonly aheadDays: number;
  readonly windowMs: number;
  readonly lockTimeoutMs: number;
  readonly dryRun: boolean;
}

function resolve(options: PartitionMaintenanceOptions): Settings {
  const aheadDays = options.aheadDays ?? 3;
  const windowMs = options.dedupeWindowMs ?? 7 * DAY_MS;
  const lockTimeoutMs = options.lockTimeoutMs ?? 2_000;
  if (!Number.isSafeInteger(aheadDays) || aheadDays < 1 || aheadDays > 366) {
    throw new ConfigurationError(`aheadDays must be a whole number of days from 1 to 366, got ${aheadDays}`);
  }
  if (!Number.isFinite(windowMs) || windowMs <= 0) throw new ConfigurationError(`dedupeWindowMs must be positive, got ${windowMs}`);
  if (!Number.isFinite(lockTimeoutMs) || lockTimeoutMs < 1) throw new ConfigurationError(`lockTimeoutMs must be at least 1, got ${lockTimeoutMs}`);
  return { aheadDays, windowMs, lockTimeoutMs, dryRun: options.dryRun === true };
}

interface Plan {
  readonly today: string;
  /** Whether `<table>_legacy` exists. */
  readonly legacy: boolean;
  readonly days: readonly string[];
  readonly create: readonly string[];
  readonly drop: readonly string[];
}

/** The days to make (missing from the window's start to `aheadDays` ahead) and to drop (wholly past the window). */
async function planOf(seam: SqlSeam<unknown>, n: InboxTableNames, s: Settings): Promise<Plan> {
  const rows = await query(seam, {
    sql: `SELECT (now() AT TIME ZONE 'UTC')::date::text AS today,
  (SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1::text)) AS kind,
  to_regclass($3::text) IS NOT NULL AS legacy,
  ((now() - make_interval(secs => $2::float8 / 1000) - interval '1 day') AT TIME ZONE 'UTC')::date::text AS last_droppable`,
    parameters: [n.qualifiedTable, s.windowMs, partitionNames(n).qualified(partitionNames(n).legacy)],
  });
  const r = rows[0];
  if (r?.['kind'] !== 'p') {
    throw new ConfigurationError(
      `${n.qualifiedTable} is not a partitioned inbox: migrate it with migrateInbox(db, { layout: 'daily-partitions' }) (or \`inboxkit migrate --layout daily-partitions\`)`,
    );
  }
  const today = String(r['today']);
  const days = await daysOf(seam, n);
  const existing = new Set(days);
  const windowDays = Math.ceil(s.windowMs / DAY_MS);
  const wanted = Array.from({ length: windowDays + s.aheadDays + 1 }, (_, i) => addDays(today, i - windowDays));
  // A day D is droppable once D + 1 day + window <= now: D <= the day of (now - window - 1 day), the last one.
  const lastDroppable = String(r['last_droppable']);
  return {
    today,
    legacy: r['legacy'] === true,
    days,
    create: wanted.filter((d) => !existing.has(d) && d > lastDroppable),
    drop: days.filter((d) => d <= lastDroppable),
  };
}

/** The days that have a partition, oldest first. */
async function daysOf(seam: SqlSeam<unknown>, n: InboxTableNames): Promise<string[]> {
  const prefix = partitionNames(n).dayPrefix;
  const rows = await query(seam, {
    sql: `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass($1::text) AND c.relname ~ ('^' || $2::text || '[0-9]{8}$') ORDER BY c.relname`,
    parameters: [n.qualifiedTable, prefix],
  });
  return rows.map((row) => {
    const digits = String(row['name']).slice(prefix.length);
    return `${digits.slice(0, 4)}-${digits.slice(4, 6)}-${digits.slice(6, 8)}`;
  });
}

/** What dropping `day` would move, and whether a completed row would keep it. */
async function dropPreview(seam: SqlSeam<unknown>, n: InboxTableNames, day: string): Promise<{ openRows: number; unexpired: boolean }> {
  const p = partitionNames(n);
  const table = p.qualified(`${p.dayPrefix}${day.replaceAll('-', '')}`);
  const [r] = await query(seam, {
    sql: `SELECT (SELECT count(*)::int FROM ${table} WHERE status <> 'completed') AS open_rows,
  EXISTS (SELECT 1 FROM ${table} WHERE status = 'completed' AND expires_at > now()) AS unexpired`,
    parameters: [],
  });
  return { openRows: Number(r?.['open_rows'] ?? 0), unexpired: r?.['unexpired'] === true };
}

/** One day made or dropped, in a transaction of its own under the maintenance lock. */
async function runStep(
  seam: SqlSeam<unknown>,
  n: InboxTableNames,
  key: string,
  s: Settings,
  day: string,
  change: 'create' | 'drop',
): Promise<PartitionStep | 'locked' | undefined> {
  const call =
    change === 'create'
      ? { sql: `SELECT ${n.qualified('_add_partition')}($1::date) AS answer`, parameters: [day] }
      : { sql: `SELECT ${n.qualified('_drop_partition')}($1::date, $2::float8) AS answer`, parameters: [day, s.windowMs] };
  const answer = await inStep(seam, key, s, call);
  if (answer === 'busy') return { action: 'busy', day, change };
  if (answer === 'locked') return 'locked';
  const [verdict, moved] = answer.split(':');
  // 'exists' / 'absent': another instance did it between this run's plan and its step.
  if (verdict === 'exists' || verdict === 'absent') return undefined;
  const movedRows = Number(moved ?? 0);
  if (verdict === 'created' || verdict === 'dropped') return { action: verdict, day, movedRows };
  // 'within-window' only when the planning's clock and the step's disagree (they differ by the run's duration).
  return { action: 'kept', day, reason: verdict === 'within-window' ? 'within-window' : 'unexpired' };
}

/**
 * Runs `call` (one row, `answer`) in a transaction of its own under the maintenance lock, with the lock
 * timeout: its answer, `locked` (another runner holds the lock) or `busy` (the lock timeout passed).
 */
async function inStep(seam: SqlSeam<unknown>, key: string, s: Settings, call: SqlStatement): Promise<string> {
  try {
    return await seam.transaction<string>(
      async (t, first) => {
        if (first[0]?.['locked'] !== true) return { end: 'rollback', value: 'locked' };
        const [r] = await t.query(call);
        return { end: 'commit', value: String(r?.['answer']) };
      },
      {
        first: {
          sql: `SELECT pg_try_advisory_xact_lock($1::bigint) AS locked, set_config('lock_timeout', $2::text, true) AS lock_timeout`,
          parameters: [key, String(Math.round(s.lockTimeoutMs))],
        },
      },
    );
  } catch (error) {
    if (sqlState(error) === '55P03') return 'busy';
    throw storeUnavailable(error);
  }
}

async function query(seam: SqlSeam<unknown>, statement: { sql: string; parameters: unknown[] }) {
  try {
    return await seam.query(statement);
  } catch (error) {
    throw storeUnavailable(error);
  }
}

/** `day` (YYYY-MM-DD) plus `n` days. */
function addDays(day: string, n: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + n * DAY_MS).toISOString().slice(0, 10);
}
