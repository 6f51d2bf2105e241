// Pruning: expired keys go, in batches; live keys and keys in flight under a live lease stay. The same through
// the in-process pruner (startIdempotencyKeyPruner, core's startPruner semantics).

import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PruneResult } from '@inboxkit/core';
import { idempotencyKeys, pruneIdempotencyKeys, startIdempotencyKeyPruner } from '../src/index.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;

beforeAll(async () => {
  t = await openHttpTestDatabase('http_prune');
});

afterAll(async () => {
  await t?.close();
});

describe('pruneIdempotencyKeys', () => {
  it('deletes expired keys in batches and keeps live ones and those under a live lease', async () => {
    const keys = idempotencyKeys({ db: t.db, schema: t.schema, principal: () => 'p' });
    const begin = async (key: string) => {
      const decision = await keys.begin({
        method: 'POST',
        route: '/x',
        headers: { 'idempotency-key': key },
        body: {},
        native: undefined,
      });
      if (decision.kind !== 'proceed') throw new Error(decision.kind);
      return decision;
    };
    const expired = Array.from({ length: 5 }, () => randomUUID());
    for (const key of expired) await (await begin(key)).complete({ status: 200 });
    const live = randomUUID();
    await (await begin(live)).complete({ status: 200 });
    const inFlight = randomUUID();
    await begin(inFlight);
    const table = sql.raw(`"${t.schema}".idempotency_key`);
    await sql`UPDATE ${table} SET expires_at = now() - interval '1 second' WHERE idempotency_key <> ${live}`.execute(
      t.db,
    );

    expect(await pruneIdempotencyKeys(t.db, { schema: t.schema, dryRun: true })).toEqual({
      status: 'dry-run',
      deleted: 5,
      batches: 0,
    });
    expect(await pruneIdempotencyKeys(t.db, { schema: t.schema, batchSize: 2, maxBatches: 1 })).toEqual({
      status: 'pruned',
      deleted: 2,
      batches: 1,
    });
    expect(await pruneIdempotencyKeys(t.db, { schema: t.schema, batchSize: 2 })).toEqual({
      status: 'pruned',
      deleted: 3,
      batches: 2,
    });
    const left = await sql<{
      idempotency_key: string;
    }>`SELECT idempotency_key FROM ${table} ORDER BY 1`.execute(t.db);
    expect(left.rows.map((r) => r.idempotency_key).sort()).toEqual([live, inFlight].sort());
    await expect(pruneIdempotencyKeys(t.db, { schema: t.schema, batchSize: 0 })).rejects.toThrow(/batchSize/);
  });
});

describe('startIdempotencyKeyPruner', () => {
  const table = () => sql.raw(`"${t.schema}".idempotency_key`);
  async function insertKeys(prefix: string, count: number, expired: boolean): Promise<void> {
    await sql`
      INSERT INTO ${table()} (principal, method, route, idempotency_key, fingerprint, status, expires_at)
      SELECT 'p', 'POST', '/pruner', ${prefix}::text || n, 'f', 'completed',
             now() + CASE WHEN ${expired}::boolean THEN interval '-1 minute' ELSE interval '1 hour' END
      FROM generate_series(1, ${count}) AS n`.execute(t.db);
  }
  async function left(prefix: string): Promise<number> {
    const r = await sql<{
      n: string;
    }>`SELECT count(*) AS n FROM ${table()} WHERE idempotency_key LIKE ${`${prefix}%`}`.execute(t.db);
    return Number(r.rows[0]!.n);
  }

  it('prunes on its schedule and on runNow, reports each run to onPrune, and stops', async () => {
    await insertKeys('sched-old-', 7, true);
    await insertKeys('sched-live-', 2, false);
    const runs: PruneResult[] = [];
    let firstRun!: (result: PruneResult) => void;
    const scheduled = new Promise<PruneResult>((resolve) => (firstRun = resolve));
    const pruner = startIdempotencyKeyPruner(t.db, {
      schema: t.schema,
      batchSize: 3,
      intervalMs: 20,
      onPrune: (result) => {
        runs.push(result);
        firstRun(result);
      },
    });
    try {
      // The first scheduled run deletes every expired key, in batches of 3.
      expect(await scheduled).toEqual({ status: 'pruned', deleted: 7, batches: 3 });
      expect(await left('sched-old-')).toBe(0);
      expect(await left('sched-live-')).toBe(2);
      await insertKeys('sched-later-', 2, true);
      const now = await pruner.runNow();
      expect(now.status).toBe('pruned');
      expect(await left('sched-later-')).toBe(0);
    } finally {
      await pruner.stop();
      await pruner.stop(); // twice is fine
    }
    const after = runs.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(runs.length).toBe(after); // stopped: no more runs
  });

  it('logs a failing run and keeps its schedule; rejects bad options', async () => {
    const warnings: string[] = [];
    let failures = 0;
    let twice!: () => void;
    const failedTwice = new Promise<void>((resolve) => (twice = resolve));
    const logger = {
      debug: () => {},
      info: () => {},
      error: () => {},
      warn: (_obj: object, msg?: string) => {
        warnings.push(msg ?? '');
        if (++failures === 2) twice();
      },
    };
    const pruner = startIdempotencyKeyPruner(t.db, { schema: 'no_such_schema', intervalMs: 10, logger });
    try {
      await failedTwice;
      expect(warnings[0]).toMatch(/prune failed; retrying on the next tick/);
      await expect(pruner.runNow()).rejects.toThrow(/no_such_schema/);
    } finally {
      await pruner.stop();
    }
    expect(() => startIdempotencyKeyPruner(t.db, { intervalMs: 0 })).toThrow(RangeError);
    expect(() => startIdempotencyKeyPruner(t.db, { jitter: 1 })).toThrow(RangeError);
  });
});
