// The public partition maintenance functions take `{ db }` (the Kysely seam is built for it) or `{ seam }`, and
// answer the same through either: they resolve the target beside the Kysely seam
// (src/kysely/partition-maintenance.ts) and hand postgres/partitions a seam, which never imports the Kysely seam
// itself. Nothing here drops a partition (dry runs, and a scheduled run with a 30-day window over the 7 days a
// new inbox starts with), so the file runs beside the others; the chaos project has the real maintenance runs.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../src/errors.js';
import {
  kyselySeam,
  maintainInboxPartitions,
  startPartitionMaintenance,
  type PartitionMaintenanceResult,
} from '../../src/postgres/index.js';
import { openTestDatabase, type TestDatabase } from '../support/postgres.js';

describe('partition maintenance targets', () => {
  let partitioned: TestDatabase;
  let plain: TestDatabase;
  beforeAll(async () => {
    partitioned = await openTestDatabase('maintenance_target', 2, 'daily-partitions');
    plain = await openTestDatabase('maintenance_target_plain', 2);
  });
  afterAll(async () => {
    await partitioned?.close();
    await plain?.close();
  });

  it('plans the same days through { db } and through { seam }', async () => {
    const options = { schema: partitioned.schema, dryRun: true, aheadDays: 5 };
    const overDb = await maintainInboxPartitions({ db: partitioned.db }, options);
    const overSeam = await maintainInboxPartitions({ seam: kyselySeam(partitioned.db) }, options);
    expect(overDb.status).toBe('dry-run');
    expect(overDb.steps.some((step) => step.action === 'would-create')).toBe(true);
    expect(overSeam).toEqual(overDb);
  });

  it('refuses a plain inbox with a ConfigurationError through either target', async () => {
    await expect(
      maintainInboxPartitions({ db: plain.db }, { schema: plain.schema, dryRun: true }),
    ).rejects.toBeInstanceOf(ConfigurationError);
    await expect(
      maintainInboxPartitions({ seam: kyselySeam(plain.db) }, { schema: plain.schema, dryRun: true }),
    ).rejects.toBeInstanceOf(ConfigurationError);
  });

  it('schedules runs over { db }: the first run at once, reported to onRun', async () => {
    const runs: PartitionMaintenanceResult[] = [];
    let reported: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (reported = resolve));
    const maintenance = startPartitionMaintenance(
      { db: partitioned.db },
      {
        schema: partitioned.schema,
        dedupeWindowMs: 30 * 86_400_000,
        intervalMs: 3_600_000,
        onRun: (result) => {
          runs.push(result);
          reported();
        },
      },
    );
    try {
      await first;
      expect(runs[0]?.status).toBe('done');
      expect(runs[0]?.steps.filter((step) => step.action === 'dropped')).toEqual([]);
      expect(runs[0]?.days.length).toBeGreaterThan(0);
    } finally {
      await maintenance.stop();
    }
  });
});
