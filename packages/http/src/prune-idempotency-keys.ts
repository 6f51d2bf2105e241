// pruneIdempotencyKeys(): deletes keys whose retention has passed, in batches, so the table stays the size of
// one retention window. Keys still in flight (a live lease) are never deleted.

import { ConfigurationError } from '@inboxkit/core';
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
}

/**
 * Deletes expired keys (`expires_at` passed, and not held by a live lease) in batches of `batchSize`, skipping
 * rows another runner has locked, so several runners can prune at once. Resolves with the number deleted.
 *
 * @example
 * setInterval(() => void pruneIdempotencyKeys(db), 60_000);
 */
export async function pruneIdempotencyKeys<DB>(
  database: Kysely<DB>,
  options: PruneIdempotencyKeysOptions = {},
): Promise<{ deleted: number }> {
  const db = database as unknown as Kysely<unknown>;
  const table = sql.raw(resolveIdempotencyKeyTableNames(options).qualifiedTable);
  const batchSize = options.batchSize ?? 5000;
  if (!Number.isSafeInteger(batchSize) || batchSize <= 0)
    throw new ConfigurationError(`batchSize must be a positive integer, got ${String(batchSize)}`);
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const result = await sql`
      DELETE FROM ${table} WHERE ctid IN (
        SELECT ctid FROM ${table}
        WHERE expires_at <= now() AND (status <> 'processing' OR locked_until <= now())
        LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)`.execute(db);
    const count = Number(result.numAffectedRows ?? 0n);
    deleted += count;
    if (count < batchSize) break;
  }
  return { deleted };
}
