// pruneIdempotencyKeys(): deletes keys whose retention has passed, in batches, so the table stays the size of
// one retention window. Keys still in flight (a live lease) are never deleted. It answers with core's
// `PruneResult`, so the in-process pruner (startIdempotencyKeyPruner), the CLI (`inboxkit prune --target http`)
// and metrics treat inbox rows and idempotency keys alike.

import { ConfigurationError, type PruneResult } from '@inboxkit/core';
import { sql, type Kysely } from 'kysely';
import {
  resolveIdempotencyKeyTableNames,
  type IdempotencyKeyTableOptions,
} from './idempotency-key-table-names.js';

/** Options of `pruneIdempotencyKeys`. */
export interface PruneIdempotencyKeysOptions extends IdempotencyKeyTableOptions {
  /** Rows deleted per statement. Default is 5,000. */
  readonly batchSize?: number;
  /** Stop after this many batches (the rest waits for the next run). Default is unlimited. */
  readonly maxBatches?: number;
  /** Count what would be deleted; delete nothing. Default is false. */
  readonly dryRun?: boolean;
}

/**
 * Deletes expired keys (`expires_at` passed, and not held by a live lease) in batches of `batchSize`, skipping
 * rows another runner has locked, so several runners can prune at once (the status is therefore never
 * `locked`, unlike the inbox's prune, which takes an advisory lock). Resolves with core's `PruneResult`:
 * `{ status: 'pruned' | 'dry-run', deleted, batches }`.
 *
 * @example
 * const { deleted } = await pruneIdempotencyKeys(db, { schema: 'app' });
 */
export async function pruneIdempotencyKeys<DB>(
  database: Kysely<DB>,
  options: PruneIdempotencyKeysOptions = {},
): Promise<PruneResult> {
  const db = database as unknown as Kysely<unknown>;
  const table = sql.raw(resolveIdempotencyKeyTableNames(options).qualifiedTable);
  const batchSize = options.batchSize ?? 5000;
  if (!Number.isSafeInteger(batchSize) || batchSize <= 0)
    throw new ConfigurationError(`batchSize must be a positive integer, got ${String(batchSize)}`);
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  if (!(maxBatches > 0))
    throw new ConfigurationError(`maxBatches must be positive, got ${String(options.maxBatches)}`);
  const expired = sql`expires_at <= now() AND (status <> 'processing' OR locked_until <= now())`;
  if (options.dryRun === true) {
    const counted = await sql<{ n: string }>`SELECT count(*) AS n FROM ${table} WHERE ${expired}`.execute(db);
    return { status: 'dry-run', deleted: Number(counted.rows[0]?.n ?? 0), batches: 0 };
  }
  let deleted = 0;
  let batches = 0;
  while (batches < maxBatches) {
    const result = await sql`
      DELETE FROM ${table} WHERE ctid IN (
        SELECT ctid FROM ${table} WHERE ${expired}
        LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)`.execute(db);
    const count = Number(result.numAffectedRows ?? 0n);
    batches++;
    deleted += count;
    if (count < batchSize) break;
  }
  return { status: 'pruned', deleted, batches };
}
