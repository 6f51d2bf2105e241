// A partitioned inbox from the command line, against the real Postgres: `migrate --layout daily-partitions`,
// `partitions` (dry run, then for real, printing each day), `doctor` seeing days ahead go missing and come back,
// `prune` deleting only in the partitions that are never dropped whole, and `partitions` refusing a plain inbox.

import { uniqueName } from '@inboxkit/testing';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { requireService } from './support/services.js';

const DAY = 86_400_000;
const utcDay = (offset: number): string => new Date(Date.now() + offset * DAY).toISOString().slice(0, 10);

let db: Kysely<unknown>;
const schema = uniqueName('cli_partitions').replace(/-/g, '_').toLowerCase();
const plain = `${schema}_plain`;
const args = (s = schema): string[] => ['--database-url', requireService('DATABASE_URL'), '--schema', s];

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = captureIo({ env: {} });
  const code = await runCli(argv, io.io);
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

beforeAll(async () => {
  db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: requireService('DATABASE_URL'), max: 2 }) }) });
});
afterAll(async () => {
  await sql.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${plain}" CASCADE`).execute(db);
  await db.destroy();
});

describe('inboxkit partitions', () => {
  const doctor = async () => {
    const { stdout } = await cli(['doctor', ...args(), '--json']);
    return (JSON.parse(stdout) as { checks: { name: string; status: string; detail: string; fix?: string }[] }).checks.find(
      (c) => c.name === 'inbox partitions',
    );
  };

  it('migrates to daily partitions, maintains them, and the doctor sees days ahead go missing and come back', async () => {
    const migrated = await cli(['migrate', '--layout', 'daily-partitions', ...args(), '--json']);
    expect(migrated.code).toBe(0);
    expect((JSON.parse(migrated.stdout) as { applied: { migration: string }[] }).applied.map((a) => a.migration)).toEqual([
      'inboxkit_0001_inbox',
      'inboxkit_0002_lean_row',
      'inboxkit_0003_daily_partitions',
      'inboxkit_0004_partition_cross_day',
      'inboxkit_0005_dead_letter_lifecycle',
    ]);
    expect(await doctor()).toMatchObject({ status: 'ok', detail: `days through ${utcDay(3)} (3 ahead of ${utcDay(0)} UTC)` });

    const dry = await cli(['partitions', ...args(), '--dedupe-window', '1d', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`would drop ${utcDay(-7)}\n`);
    expect(dry.stdout).toMatch(/days to make, 6 to drop\. Nothing was changed\./);
    const run = await cli(['partitions', ...args(), '--dedupe-window', '1d']);
    expect(run.code).toBe(0);
    for (let d = -7; d <= -2; d++) expect(run.stdout).toContain(`dropped ${utcDay(d)}\n`);
    expect(run.stdout).toContain(`made 0 days, dropped 6, kept 0, 0 waited past the lock timeout; days now ${utcDay(-1)} .. ${utcDay(3)} (5)`);

    // Maintenance stopped: today's and the following days' partitions are gone.
    for (let d = 0; d <= 3; d++) {
      const name = `inbox_p${utcDay(d).replaceAll('-', '')}`;
      await sql.raw(`DROP TABLE "${schema}"."${name}", "${schema}"."inbox_details_p${utcDay(d).replaceAll('-', '')}"`).execute(db);
    }
    const missing = await doctor();
    expect(missing).toMatchObject({ status: 'fail', detail: `no partition for today (${utcDay(0)}): new messages go to the default partition` });
    expect(missing?.fix).toContain('inboxkit partitions');
    const again = await cli(['partitions', ...args(), '--dedupe-window', '1d', '--json']);
    expect(again.code).toBe(0);
    const result = JSON.parse(again.stdout) as { status: string; steps: { action: string; day: string }[] };
    expect(result.status).toBe('done');
    expect(result.steps.filter((s) => s.action === 'created').map((s) => s.day)).toEqual([0, 1, 2, 3].map(utcDay));
    expect(await doctor()).toMatchObject({ status: 'ok' });
  });

  it('prunes a partitioned inbox only in its undated and default partitions', async () => {
    const t = `"${schema}".inbox`;
    await sql.raw(`INSERT INTO ${t} (consumer, message_id, day, status, attempts, expires_at) VALUES
      ('c', 'undated', 'infinity', 'completed', 1, now() - interval '1 hour'),
      ('c', 'late', '2001-01-01', 'completed', 1, now() - interval '1 hour'),
      ('c', 'in-a-day', '${utcDay(0)}', 'completed', 1, now() - interval '1 hour')`).execute(db);
    const pruned = await cli(['prune', ...args(), '--json']);
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ status: 'pruned', deleted: 2 });
    const left = await sql<{ message_id: string }>`SELECT message_id FROM ${sql.table(`${schema}.inbox`)} WHERE consumer = 'c'`.execute(db);
    expect(left.rows.map((r) => r.message_id)).toEqual(['in-a-day']);
  });

  it('refuses a plain inbox, saying how to migrate it', async () => {
    expect((await cli(['migrate', ...args(plain)])).code).toBe(0);
    const { code, stderr } = await cli(['partitions', ...args(plain)]);
    expect(code).toBe(3);
    expect(stderr).toContain('is not a partitioned inbox: migrate it with');
    expect(await cli(['doctor', ...args(plain), '--json']).then((r) => r.stdout)).not.toContain('inbox partitions');
  });
});
