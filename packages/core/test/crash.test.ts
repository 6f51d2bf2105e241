// Tests 2 and 3 of the issue with real processes on real Postgres: a worker SIGKILLed in the middle of its
// handler, or after its commit but before it reported; attempts that survive process restarts; and crash loops
// that still reach the dead-letter queue, counted through recordAttemptsStarted or the broker's delivery count.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { Outcome } from '../src/outcome.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

const WORKER = fileURLToPath(new URL('./fixtures/crash-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

interface RunOptions {
  readonly consumer: string;
  readonly messageId: string;
  readonly behaviour: 'hang-in-handler' | 'hang-after-commit' | 'fail' | 'ok';
  readonly maxAttempts?: number;
  readonly recordAttemptsStarted?: boolean;
  readonly deliveryCount?: number;
  /** SIGKILL the worker when it prints this line. */
  readonly killOn?: 'IN_HANDLER' | 'COMMITTED';
  /** SIGKILL the worker once it has reported this many outcomes (it goes on meanwhile: the kill lands anywhere). */
  readonly killAfterOutcomes?: number;
  /** A statement handler handles these ids in turn (see fixtures/crash-worker.ts). */
  readonly statementIds?: readonly string[];
  /** With `statementIds`: through `handleBatch`, this many at a time. */
  readonly statementBatch?: number;
}

let t: TestDatabase;

/** Runs one delivery in a fresh Node process; resolves with its outcome, or `killed` if it was SIGKILLed. */
function runWorker(options: RunOptions): Promise<Outcome | 'killed'> {
  const input = {
    url: t.url,
    schema: t.schema,
    maxAttempts: 3,
    recordAttemptsStarted: false,
    ...options,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(input)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let outcome: Outcome | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (const line of out.split('\n')) {
        if (options.killOn !== undefined && line === options.killOn) child.kill('SIGKILL');
        if (line.startsWith('OUTCOME ')) outcome = JSON.parse(line.slice('OUTCOME '.length)) as Outcome;
      }
      if (options.killAfterOutcomes !== undefined && out.split('\nOUTCOME ').length - 1 >= options.killAfterOutcomes) {
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve('killed');
      else if (outcome !== undefined) resolve(outcome);
      else reject(new Error(`worker exited with ${code}: ${err}`));
    });
  });
}

describe('crashes and restarts on Postgres', () => {
  beforeAll(async () => {
    t = await openTestDatabase('crash');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('rolls back a worker killed mid-handler: the redelivery applies the effect exactly once', async () => {
    expect(await runWorker({ consumer: 'kill-mid', messageId: 'm1', behaviour: 'hang-in-handler', killOn: 'IN_HANDLER' })).toBe('killed');
    expect(await countEffects(t.db, t.schema, 'kill-mid')).toBe(0);
    expect(await runWorker({ consumer: 'kill-mid', messageId: 'm1', behaviour: 'ok' })).toMatchObject({ status: 'processed' });
    expect(await runWorker({ consumer: 'kill-mid', messageId: 'm1', behaviour: 'ok' })).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(t.db, t.schema, 'kill-mid', 'm1')).toBe(1);
  });

  it('keeps the effect of a worker killed after its commit but before it reported: the redelivery is a duplicate', async () => {
    expect(await runWorker({ consumer: 'kill-after', messageId: 'm1', behaviour: 'hang-after-commit', killOn: 'COMMITTED' })).toBe('killed');
    expect(await countEffects(t.db, t.schema, 'kill-after', 'm1')).toBe(1);
    expect(await runWorker({ consumer: 'kill-after', messageId: 'm1', behaviour: 'ok' })).toEqual({
      status: 'duplicate',
      messageId: 'm1',
      reason: 'completed',
    });
    expect(await countEffects(t.db, t.schema, 'kill-after', 'm1')).toBe(1);
  });

  it.each([
    ['one by one', 1],
    ['in batches of 10', 10],
  ] as const)('applies each id once when workers sending statement handlers %s are SIGKILLed at random moments', async (_, batch) => {
    // statementHandler's path: one autocommit statement claims and runs the statements, per delivery or per
    // batch. Kills land before, during and after it; every id must end applied exactly once, whatever was cut.
    const consumer = `statements-kill-${batch}`;
    const ids = Array.from({ length: 300 }, (_, i) => `s${i}`);
    const killed: (Outcome | 'killed')[] = [];
    let applied = 0;
    for (const after of [40, 60, 80]) {
      // Each worker starts over from the first id: the ids done before are duplicates, then it goes further.
      killed.push(await runWorker({ consumer, messageId: '-', behaviour: 'ok', statementIds: ids, statementBatch: batch, killAfterOutcomes: after }));
      const now = await countEffects(t.db, t.schema, consumer);
      expect(now).toBeGreaterThanOrEqual(applied);
      applied = now;
    }
    // Every kill landed mid-run, with ids left to do (a worker that finished all 300 first would prove nothing).
    expect(killed).toEqual(['killed', 'killed', 'killed']);
    expect(applied).toBeLessThan(ids.length);
    await runWorker({ consumer, messageId: '-', behaviour: 'ok', statementIds: ids, statementBatch: batch });
    const { rows } = await t.pool.query<{ message_id: string; n: number }>(
      `SELECT message_id, count(*)::int AS n FROM "${t.schema}".effects WHERE consumer = $1 GROUP BY message_id`,
      [consumer],
    );
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
    const [done] = (
      await t.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${t.schema}".inbox WHERE consumer = $1 AND status = 'completed'`,
        [consumer],
      )
    ).rows;
    expect(done!.n).toBe(ids.length);
  });

  it('counts attempts across process restarts and dead-letters at maxAttempts', async () => {
    const outcomes: (Outcome | 'killed')[] = [];
    for (let i = 0; i < 4; i++) outcomes.push(await runWorker({ consumer: 'restarts', messageId: 'm1', behaviour: 'fail' }));
    expect(outcomes).toMatchObject([
      { status: 'retry', attempt: 1 },
      { status: 'retry', attempt: 2 },
      { status: 'dead-letter', reason: 'max-attempts', attempts: 3 },
      { status: 'dead-letter', reason: 'max-attempts', attempts: 3 },
    ]);
    expect(await countEffects(t.db, t.schema, 'restarts')).toBe(0);
  });

  it('continues the attempt count with new store and consumer objects in the same process', async () => {
    const make = () =>
      idempotentConsumer<unknown, TestTx>({
        name: 'new-objects',
        store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
        maxAttempts: 3,
        backoff: { initialDelayMs: 0, maxDelayMs: 0 },
        handler: async (m, { tx }) => {
          await insertEffect(tx, t.schema, 'new-objects', m.id);
          throw new Error('always');
        },
      });
    const message = { id: 'm1', body: '{}', headers: {}, source: { transport: 'memory' } };
    expect(await make().handle(message)).toMatchObject({ status: 'retry', attempt: 1 });
    expect(await make().handle(message)).toMatchObject({ status: 'retry', attempt: 2 });
    expect(await make().handle(message)).toMatchObject({ status: 'dead-letter', attempts: 3 });
  });

  it('dead-letters a message that kills its worker every time, through recordAttemptsStarted (Kafka)', async () => {
    for (let i = 0; i < 3; i++) {
      expect(
        await runWorker({ consumer: 'loop-started', messageId: 'poison', behaviour: 'hang-in-handler', killOn: 'IN_HANDLER', recordAttemptsStarted: true }),
      ).toBe('killed');
    }
    const [row] = await new PostgresInboxStore({ db: t.db, schema: t.schema }).findRows('loop-started', ['poison']);
    expect(row).toMatchObject({ status: 'processing', startedAttempts: 3 });
    // The fourth delivery is refused before the handler runs (it would hang: the worker would not exit).
    expect(
      await runWorker({ consumer: 'loop-started', messageId: 'poison', behaviour: 'hang-in-handler', killOn: 'IN_HANDLER', recordAttemptsStarted: true }),
    ).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect(await countEffects(t.db, t.schema, 'loop-started')).toBe(0);
  });

  it('dead-letters a message that kills its worker every time, through the broker delivery count (SQS, RabbitMQ)', async () => {
    for (let deliveryCount = 1; deliveryCount <= 3; deliveryCount++) {
      expect(
        await runWorker({ consumer: 'loop-count', messageId: 'poison', behaviour: 'hang-in-handler', killOn: 'IN_HANDLER', deliveryCount }),
      ).toBe('killed');
    }
    expect(
      await runWorker({ consumer: 'loop-count', messageId: 'poison', behaviour: 'hang-in-handler', killOn: 'IN_HANDLER', deliveryCount: 4 }),
    ).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
    expect(await countEffects(t.db, t.schema, 'loop-count')).toBe(0);
  });
});
