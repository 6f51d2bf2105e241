// migrate, status, prune and doctor against the real Postgres (and the real brokers for doctor's
// connectivity checks), through `runCli` as an operator would type them.

import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { uniqueName } from '@inboxkit/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { inboxDatabase } from './support/inbox-database.js';
import type { InboxDatabase } from './support/inbox-database.js';
import { requireService } from './support/services.js';

let database: InboxDatabase;
const dbArgs = (): string[] => [
  '--database-url',
  requireService('DATABASE_URL'),
  '--schema',
  database.schema,
];

async function cli(
  argv: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = captureIo({ env });
  const code = await runCli(argv, io.io);
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

beforeAll(async () => {
  database = await inboxDatabase();
  const t = sql.table(`${database.schema}.inbox`);
  const details = sql.table(`${database.schema}.inbox_details`);
  // The hot rows (changed_at: when each took its status), and the details of those that took a rare path.
  await sql`insert into ${t} (consumer, message_id, status, attempts, expires_at, changed_at) values
    ('orders', 'done-old',     'completed',     1, now() - interval '2 hours',  now() - interval '8 days'),
    ('orders', 'done-soon',    'completed',     1, now() + interval '30 minutes', now() - interval '7 days'),
    ('orders', 'done-later',   'completed',     1, now() + interval '6 days',   now() - interval '1 day'),
    ('orders', 'dead-1',       'dead_lettered', 5, now() + interval '7 days',   now()),
    ('orders', 'dead-2',       'dead_lettered', 1, now() + interval '7 days',   now()),
    ('orders', 'stuck',        'processing',    2, now() + interval '7 days',   now() - interval '3 hours'),
    ('billing', 'b-expired',   'completed',     1, now() - interval '1 hour',   now() - interval '8 days'),
    ('billing', 'b-retrying',  'failed',        2, now() + interval '7 days',   now())`.execute(database.db);
  await sql`insert into ${details} (consumer, message_id, received_at, available_at, dead_letter_reason, dead_lettered_at, lease_token, locked_until, replay_count) values
    ('orders', 'done-soon',    now() - interval '7 days',  now(), null, null, null, null, 1),
    ('orders', 'dead-1',       now() - interval '1 day',   now(), 'max-attempts', now(), null, null, 0),
    ('orders', 'dead-2',       now() - interval '1 day',   now(), 'schema-invalid', now(), null, null, 0),
    ('orders', 'stuck',        now() - interval '3 hours', now(), null, null, gen_random_uuid(), now() - interval '10 minutes', 0),
    ('billing', 'b-retrying',  now(),                      now(), null, null, null, null, 0)`.execute(database.db);
});
afterAll(async () => {
  await database?.dispose();
});

describe('inboxkit migrate', () => {
  it('creates the inbox with core migrations, then reports it up to date', async () => {
    const schema = uniqueName('cli_migrate').replace(/-/g, '_').toLowerCase();
    try {
      const first = await cli([
        'migrate',
        '--database-url',
        requireService('DATABASE_URL'),
        '--schema',
        schema,
      ]);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/applied inboxkit_0001_inbox/);
      const second = await cli([
        'migrate',
        '--database-url',
        requireService('DATABASE_URL'),
        '--schema',
        schema,
        '--json',
      ]);
      expect(JSON.parse(second.stdout)).toEqual({ table: `${schema}.inbox`, applied: [] });
      const { rows } = await sql<{
        t: string | null;
      }>`select to_regclass(${`${schema}.inbox_replays`})::text as t`.execute(database.db);
      expect(rows[0]?.t).not.toBeNull();
    } finally {
      await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(database.db);
    }
  });

  it("creates the reconciliation sweeper's tables only with --reconciliation, in the inbox's schema", async () => {
    const schema = uniqueName('cli_migrate_rec').replace(/-/g, '_').toLowerCase();
    const tables = async (): Promise<string[]> =>
      (
        await sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = ${schema} AND table_name LIKE 'reconciliation%' ORDER BY 1`.execute(
          database.db,
        )
      ).rows.map((r) => r.name);
    const args = ['migrate', '--database-url', requireService('DATABASE_URL'), '--schema', schema];
    try {
      expect((await cli(args)).code).toBe(0);
      expect(await tables()).toEqual([]);
      const first = await cli([...args, '--reconciliation']);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(
        /Reconciliation tables in \S+: created reconciliation_watermarks, reconciliation_differences\./,
      );
      expect(await tables()).toEqual(['reconciliation_differences', 'reconciliation_watermarks']);
      const second = await cli([...args, '--reconciliation', '--json']);
      expect(JSON.parse(second.stdout)).toEqual({
        table: `${schema}.inbox`,
        applied: [],
        reconciliation: { schema, created: [] },
      });
      // The sweeper's open-differences index came with them (the same statements as migrateReconciliation).
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_indexes
        WHERE schemaname = ${schema} AND indexname = 'reconciliation_differences_open'`.execute(database.db);
      expect(rows[0]?.n).toBe(1);
    } finally {
      await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(database.db);
    }
  });
});

describe('inboxkit status', () => {
  it('reports rows by status, the stuck lease, dead letters by reason, expiring rows and prune lag per consumer', async () => {
    const { code, stdout } = await cli(['status', ...dbArgs(), '--json']);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as { consumers: Record<string, unknown>[] };
    const orders = report.consumers.find((c) => c.consumer === 'orders');
    expect(orders).toMatchObject({
      rows: { completed: 3, processing: 1, failed: 0, dead_lettered: 2 },
      total: 6,
      oldestProcessing: { messageId: 'stuck', lease: 'expired' },
      deadLettersByReason: { 'max-attempts': 1, 'schema-invalid': 1 },
      expiringSoon: 1,
      expiredNotPruned: 1,
      oldestBeyondWindow: true,
      replayed: 1,
    });
    expect(orders!.pruneLagMs).toBeGreaterThan(3_600_000);
    expect(report.consumers.find((c) => c.consumer === 'billing')).toMatchObject({
      rows: { completed: 1, failed: 1 },
      expiredNotPruned: 1,
    });

    const text = await cli(['status', ...dbArgs(), '--consumer', 'orders']);
    expect(text.stdout).toMatch(/oldest processing: stuck, received 3h\b.*lease EXPIRED/);
    expect(text.stdout).toMatch(/dead letters by reason: max-attempts 1, schema-invalid 1/);
    expect(text.stdout).not.toMatch(/billing/);
  });

  it('says to run migrate when the inbox table does not exist (exit 3)', async () => {
    const { code, stderr } = await cli([
      'status',
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      'no_such_schema',
    ]);
    expect(code).toBe(3);
    expect(stderr).toMatch(/no_such_schema\.inbox does not exist: run `inboxkit migrate`/);
  });

  it('exits 3 on a database it cannot reach and never prints the password', async () => {
    const { code, stderr } = await cli([
      'status',
      '--database-url',
      'postgres://app:s3cret-pw@127.0.0.1:1/app',
    ]);
    expect(code).toBe(3);
    expect(stderr).not.toContain('s3cret-pw');
  });
});

describe('inboxkit prune', () => {
  it('dry run counts, then deletes only expired completed rows, per consumer when asked', async () => {
    const dry = await cli(['prune', ...dbArgs(), '--dry-run']);
    expect(dry.stdout).toMatch(/2 expired completed rows would be deleted/);
    expect((await database.rows('orders')).map((r) => r.id)).toContain('done-old');

    const billing = await cli(['prune', ...dbArgs(), '--consumer', 'billing', '--json']);
    expect(JSON.parse(billing.stdout)).toMatchObject({ status: 'pruned', deleted: 1, consumer: 'billing' });
    expect((await database.rows('orders')).map((r) => r.id)).toContain('done-old');

    const all = await cli(['prune', ...dbArgs(), '--batch-size', '1']);
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/Deleted 1 expired completed rows/);
    const left = (await database.rows('orders')).map((r) => r.id);
    expect(left).not.toContain('done-old');
    expect(left).toEqual(expect.arrayContaining(['done-soon', 'done-later', 'dead-1', 'dead-2', 'stuck']));
    expect((await database.rows('billing')).map((r) => r.id)).toEqual(['b-retrying']);
  });
});

describe('inboxkit doctor', () => {
  it('checks every configured service and the inbox table, masks passwords, and passes a sound config', async () => {
    const amqp = requireService('AMQP_URL');
    const { code, stdout } = await cli([
      'doctor',
      ...dbArgs(),
      '--kafka-brokers',
      requireService('KAFKA_BROKERS'),
      '--amqp-url',
      amqp,
      '--sqs-endpoint',
      requireService('SQS_ENDPOINT'),
      '--json',
    ]);
    const report = JSON.parse(stdout) as {
      ok: boolean;
      checks: { name: string; status: string; detail: string }[];
    };
    expect(
      report.checks
        .filter((c) => ['postgres', 'inbox table', 'kafka', 'rabbitmq', 'sqs'].includes(c.name))
        .map((c) => [c.name, c.status]),
    ).toEqual([
      ['postgres', 'ok'],
      ['inbox table', 'ok'],
      ['kafka', 'ok'],
      ['rabbitmq', 'ok'],
      ['sqs', 'ok'],
    ]);
    expect(report.ok).toBe(true);
    expect(code).toBe(0);
    const password = new URL(amqp).password;
    if (password !== '') expect(stdout).not.toContain(`:${password}@`);
  });

  it("reads the SQS source queue's visibility and redrive policy and says what to change", async () => {
    const endpoint = requireService('SQS_ENDPOINT');
    const client = new SQSClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
    const name = uniqueName('cli-doctor');
    const { QueueUrl } = await client.send(
      new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: '20' } }),
    );
    try {
      const { code, stdout } = await cli([
        'doctor',
        ...dbArgs(),
        '--sqs-endpoint',
        endpoint,
        '--transport',
        'sqs',
        '--source',
        name,
        '--handler-timeout',
        '30s',
        '--max-attempts',
        '5',
      ]);
      expect(code).toBe(1);
      expect(stdout).toMatch(/sqs source queue\s+WARN\s+.*VisibilityTimeout 20 s, no redrive policy/);
      expect(stdout).toMatch(/SQS visibility vs handler timeout\s+FAIL/);
      expect(stdout).toMatch(/raise the queue's VisibilityTimeout above 30s/);
    } finally {
      await client.send(new DeleteQueueCommand({ QueueUrl })).catch(() => undefined);
      client.destroy();
    }
  });

  it('fails a config file whose dedupe window is shorter than its retry horizon', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'inboxkit-doctor-'));
    await writeFile(
      join(dir, 'inboxkit.json'),
      JSON.stringify({
        consumers: [{ name: 'payments', maxAttempts: 10, dedupeWindow: '5m', backoff: { maxDelay: '5m' } }],
      }),
    );
    const io = captureIo();
    const code = await runCli(['doctor', '--config', 'inboxkit.json'], { ...io.io, cwd: dir });
    expect(code).toBe(1);
    expect(io.stdout()).toMatch(/payments: dedupe window vs retry horizon\s+FAIL/);
    expect(io.stdout()).toMatch(/raise dedupeWindow to at least/);
  });
});
