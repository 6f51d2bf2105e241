// `inboxkit discard` and `inboxkit archive` through runCli on the real Postgres (and the real SQS, RabbitMQ and
// Kafka DLQs): nothing changes without --yes, a selection is retired with its audit, the broker DLQ copies of
// discarded dead letters are removed and the others left, `prune --retired-retention` deletes retired rows,
// and `status` reads a partitioned inbox through core (a row's details on its own day).

import { migrateInbox } from '@inboxkit/core/postgres';
import { uniqueName } from '@inboxkit/testing';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { eventually } from './support/eventually.js';
import { effectConsumer, inboxDatabase } from './support/inbox-database.js';
import { kafkaFixture } from './support/kafka-fixture.js';
import type { InboxDatabase } from './support/inbox-database.js';
import { rabbitmqFixture } from './support/rabbitmq-fixture.js';
import type { ReplayFixture } from './support/replay-fixture.js';
import { requireService } from './support/services.js';
import { sqsFixture } from './support/sqs-fixture.js';

let database: InboxDatabase;
const dbArgs = (schema = database.schema): string[] => ['--database-url', requireService('DATABASE_URL'), '--schema', schema];

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = captureIo({ env: { USER: 'ops-ana' } });
  const code = await runCli(argv, io.io);
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

beforeAll(async () => {
  database = await inboxDatabase();
  const t = sql.table(`${database.schema}.inbox`);
  const details = sql.table(`${database.schema}.inbox_details`);
  await sql`insert into ${t} (consumer, message_id, status, fingerprint, attempts, expires_at, changed_at) values
    ('orders', 'dead-1', 'dead_lettered', 'f', 5, now() + interval '7 days', now()),
    ('orders', 'dead-2', 'dead_lettered', 'f', 1, now() + interval '7 days', now()),
    ('orders', 'dead-3', 'dead_lettered', 'f', 1, now() + interval '7 days', now()),
    ('orders', 'done',   'completed',     'f', 1, now() + interval '7 days', now())`.execute(database.db);
  await sql`insert into ${details} (consumer, message_id, received_at, dead_letter_reason, dead_lettered_at) values
    ('orders', 'dead-1', now(), 'max-attempts', now()),
    ('orders', 'dead-2', now(), 'schema-invalid', now()),
    ('orders', 'dead-3', now(), 'schema-invalid', now())`.execute(database.db);
});
afterAll(async () => {
  await database?.dispose();
});

const statuses = async (consumer: string): Promise<Record<string, string>> =>
  Object.fromEntries((await database.rows(consumer)).map((r) => [r.id, r.status]));

describe('inboxkit discard / archive', () => {
  it('refuses a selection that names nothing, and a missing --reason, as usage errors', async () => {
    const none = await cli(['discard', '--consumer', 'orders', '--reason', 'x', ...dbArgs()]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/select the dead letters to discard: --id ID, --dead-letter-reason REASON/);
    const noReason = await cli(['archive', '--consumer', 'orders', '--all', ...dbArgs()]);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toMatch(/needs --reason TEXT/);
    const half = await cli(['discard', '--consumer', 'orders', '--all', '--reason', 'x', '--transport', 'sqs', ...dbArgs()]);
    expect(half.code).toBe(2);
    expect(half.stderr).toMatch(/--transport and --from go together/);
  });

  it('says what it would do without --yes and changes nothing; with --yes discards a reason group, audited', async () => {
    const before = await statuses('orders');
    const dry = await cli(['discard', '--consumer', 'orders', '--dead-letter-reason', 'schema-invalid', '--reason', 'bad test data', ...dbArgs()]);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toContain('Would discard 2 dead letter(s) of consumer orders:');
    expect(dry.stdout).toContain('Nothing changed: rerun with --yes to discard them.');
    expect(await statuses('orders')).toEqual(before);

    const run = await cli(['discard', '--consumer', 'orders', '--dead-letter-reason', 'schema-invalid', '--reason', 'bad test data', '--yes', ...dbArgs(), '--json']);
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as { actionId: string; dryRun: boolean; changed: { messageId: string; priorStatus: string }[] };
    expect(out.dryRun).toBe(false);
    expect(out.changed.map((c) => c.messageId)).toEqual(['dead-2', 'dead-3']);
    expect(await statuses('orders')).toEqual({ 'dead-1': 'dead_lettered', 'dead-2': 'discarded', 'dead-3': 'discarded', done: 'completed' });
    const [audit] = await database.store.listReplays({ consumer: 'orders', messageId: 'dead-2' });
    expect(audit).toMatchObject({ replayId: out.actionId, requestedBy: 'ops-ana', outcome: 'discarded dead_lettered/schema-invalid: bad test data' });

    const status = await cli(['status', '--consumer', 'orders', ...dbArgs()]);
    expect(status.stdout).toContain('retired dead letters: 2 discarded, 0 archived');
    expect(status.stdout).toContain('dead letters by reason: max-attempts 1');
  });

  it('archives one id, and prune --retired-retention deletes retired rows past it', async () => {
    const run = await cli(['archive', '--consumer', 'orders', '--id', 'dead-1', '--reason', 'kept for the auditors', '-y', ...dbArgs()]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Archived 1 dead letter\(s\) of consumer orders, audited under \S+ by ops-ana:/);
    expect((await statuses('orders'))['dead-1']).toBe('archived');
    // Archiving it again finds nothing to do.
    expect((await cli(['archive', '--consumer', 'orders', '--id', 'dead-1', '--reason', 'again', '--yes', ...dbArgs()])).code).toBe(1);

    const kept = await cli(['prune', '--consumer', 'orders', ...dbArgs(), '--json']);
    expect(JSON.parse(kept.stdout)).toMatchObject({ status: 'pruned', deleted: 0 });
    expect(JSON.parse(kept.stdout)).not.toHaveProperty('retired');
    const pruned = await cli(['prune', '--consumer', 'orders', '--retired-retention', '0s', ...dbArgs()]);
    expect(pruned.code).toBe(0);
    expect(pruned.stdout).toMatch(/Deleted 0 expired completed rows and 3 discarded\/archived dead letters past their retention/);
    expect(await statuses('orders')).toEqual({ done: 'completed' });
  });
});

for (const [name, makeFixture] of [
  ['sqs', sqsFixture],
  ['rabbitmq', rabbitmqFixture],
  ['kafka', () => kafkaFixture('kafkajs')],
] as const) {
  describe(`inboxkit discard --transport ${name} (real broker)`, () => {
    let fixture: ReplayFixture | undefined;
    afterAll(async () => {
      await fixture?.dispose().catch(() => undefined);
    });

    it('removes the DLQ copies of the discarded dead letters and leaves the others', { timeout: 120_000 }, async () => {
      const f = (fixture = await makeFixture());
      const consumerName = uniqueName(`discard-${name}`);
      const { consumer, failing } = effectConsumer(database, consumerName);
      for (const id of ['x-1', 'x-2', 'x-3']) failing.add(id);
      await f.start(consumer);
      // The kept dead letter reaches the DLQ last: a Kafka DLQ is a log, whose copies are removed by moving the
      // replay group's offset past a prefix of them (a removed copy behind a kept one stays, for the next run).
      await f.publish(['x-1', 'x-2', 'ok-1'].map((id) => ({ id, body: JSON.stringify({ id }) })));
      await eventually(
        async () => (await f.dlqDepth()) === 2 && (await statuses(consumerName))['ok-1'] === 'completed',
        async () => `DLQ depth ${await f.dlqDepth()}, rows ${JSON.stringify(await statuses(consumerName))}`,
        60_000,
      );
      await f.publish([{ id: 'x-3', body: JSON.stringify({ id: 'x-3' }) }]);
      await eventually(
        async () => (await f.dlqDepth()) === 3,
        async () => `DLQ depth ${await f.dlqDepth()}, rows ${JSON.stringify(await statuses(consumerName))}`,
        60_000,
      );
      await f.stop();

      const run = await cli([
        'discard', '--consumer', consumerName, '--id', 'x-1,x-2', '--reason', 'duplicate orders from the test shop', '--yes',
        '--transport', f.transport, '--from', f.dlq, ...f.cliArgs, ...dbArgs(), '--json',
      ]);
      expect(run.code).toBe(0);
      const out = JSON.parse(run.stdout) as { changed: { messageId: string }[]; dlq: { removed: string[]; removedBrokerOnly: string[]; released: number } };
      expect(out.changed.map((c) => c.messageId)).toEqual(['x-1', 'x-2']);
      expect(out.dlq.removed.sort()).toEqual(['x-1', 'x-2']);
      expect(out.dlq).toMatchObject({ removedBrokerOnly: [], released: 1 });
      await eventually(
        async () => (await f.dlqDepth()) === 1,
        async () => `DLQ depth ${await f.dlqDepth()}`,
      );
      expect((await f.deadLetters()).map((e) => e.id)).toEqual(['x-3']);
      expect(await statuses(consumerName)).toEqual({ 'x-1': 'discarded', 'x-2': 'discarded', 'x-3': 'dead_lettered', 'ok-1': 'completed' });
    });
  });
}

describe('inboxkit status on a partitioned inbox', () => {
  it('joins each row to the details of its own day: an id on two days counts as replayed once', async () => {
    const pool = new pg.Pool({ connectionString: requireService('DATABASE_URL'), max: 2 });
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
    const schema = uniqueName('cli_daily').replace(/[^A-Za-z0-9_]/g, '_').toLowerCase();
    try {
      await migrateInbox(db, { schema, layout: 'daily-partitions' });
      const today = new Date().toISOString().slice(0, 10);
      const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
      // One id stamped on two days (a producer that re-stamped a resend, no cross-day check): replayed and
      // completed on one day, dead-lettered on the other.
      await sql`insert into ${sql.table(`${schema}.inbox`)} (consumer, message_id, day, status, attempts, expires_at) values
        ('pay', 'twice', ${yesterday}::date, 'completed', 1, now() + interval '7 days'),
        ('pay', 'twice', ${today}::date, 'dead_lettered', 5, now() + interval '7 days')`.execute(db);
      await sql`insert into ${sql.table(`${schema}.inbox_details`)} (consumer, message_id, day, received_at, replay_count, dead_letter_reason, dead_lettered_at) values
        ('pay', 'twice', ${yesterday}::date, now(), 1, null, null),
        ('pay', 'twice', ${today}::date, now(), 0, 'max-attempts', now())`.execute(db);
      const status = await cli(['status', '--consumer', 'pay', ...dbArgs(schema), '--json']);
      expect(status.code).toBe(0);
      const report = JSON.parse(status.stdout) as { consumers: { replayed: number; rows: Record<string, number>; deadLettersByReason: Record<string, number> }[] };
      expect(report.consumers[0]).toMatchObject({ replayed: 1, deadLettersByReason: { 'max-attempts': 1 } });
      expect(report.consumers[0]!.rows).toMatchObject({ completed: 1, dead_lettered: 1 });
    } finally {
      await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db).catch(() => undefined);
      await db.destroy();
    }
  });
});
