// SIGKILL between the effect and the ack, for every adapter: a worker process whose handler writes through the
// library's own transaction is killed after the commit but before the outcome reached the transport, and at
// random moments of a run (inside handlers, between effect and ack, mid-commit); every id ends applied once.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Outcome } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTERS, type AdapterName } from './fixtures/adapters.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

const WORKER = fileURLToPath(new URL('./fixtures/crash-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('crash');
});
afterAll(async () => {
  await t?.close();
});

interface Run {
  readonly adapter: AdapterName;
  readonly consumer: string;
  readonly messageIds: readonly string[];
  readonly behaviour: 'hang-in-handler' | 'hang-after-commit' | 'ok';
  readonly killOn?: 'IN_HANDLER' | 'COMMITTED';
  readonly killAfterOutcomes?: number;
}

/** Runs a worker; resolves with its outcomes, or `killed` if it was SIGKILLed. */
function runWorker(run: Run): Promise<Outcome[] | 'killed'> {
  const input = { url: t.url, schema: t.schema, ...run };
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--conditions=@inboxkit/source', '--import', 'tsx', WORKER, JSON.stringify(input)],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    const outcomes: Outcome[] = [];
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const lines = out.split('\n');
      out = lines.pop()!;
      for (const line of lines) {
        if (run.killOn !== undefined && line === run.killOn) child.kill('SIGKILL');
        if (line.startsWith('OUTCOME ')) outcomes.push(JSON.parse(line.slice('OUTCOME '.length)) as Outcome);
        if (run.killAfterOutcomes !== undefined && outcomes.length >= run.killAfterOutcomes)
          child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve('killed');
      else if (code === 0) resolve(outcomes);
      else reject(new Error(`worker exited with ${code}: ${err}`));
    });
  });
}

async function appliedPerId(consumer: string): Promise<Map<string, number>> {
  const { rows } = await t.pool.query<{ message_id: string; n: number }>(
    `SELECT message_id, count(*)::int AS n FROM "${t.schema}".effects WHERE consumer = $1 GROUP BY message_id`,
    [consumer],
  );
  return new Map(rows.map((r) => [r.message_id, r.n]));
}

// drizzle-postgres-js runs on the postgres.js path, crashed already; each worker is a Node process of its own.
const CRASHED = (Object.keys(ADAPTERS) as AdapterName[]).filter((name) => name !== 'drizzle-postgres-js');

describe.each(CRASHED)('crashes through the %s adapter', (adapter) => {
  it('keeps the effect of a worker killed after its commit but before the ack: the redelivery is a duplicate', async () => {
    const consumer = `${adapter}-after`;
    expect(
      await runWorker({
        adapter,
        consumer,
        messageIds: ['m1'],
        behaviour: 'hang-after-commit',
        killOn: 'COMMITTED',
      }),
    ).toBe('killed');
    expect(await countEffects(t.pool, t.schema, consumer, 'm1')).toBe(1);
    expect(await runWorker({ adapter, consumer, messageIds: ['m1'], behaviour: 'ok' })).toEqual([
      { status: 'duplicate', messageId: 'm1', reason: 'completed' },
    ]);
    expect(await countEffects(t.pool, t.schema, consumer, 'm1')).toBe(1);
  }, 120_000);

  it('applies each id once when workers are SIGKILLed at random moments of a run', async () => {
    const consumer = `${adapter}-random`;
    const ids = Array.from({ length: 60 }, (_, i) => `r${i}`);
    for (const after of [15, 35]) {
      // Each worker starts over from the first id: those done before are duplicates, then it goes further.
      expect(
        await runWorker({ adapter, consumer, messageIds: ids, behaviour: 'ok', killAfterOutcomes: after }),
      ).toBe('killed');
    }
    expect((await appliedPerId(consumer)).size).toBeLessThan(ids.length);
    await runWorker({ adapter, consumer, messageIds: ids, behaviour: 'ok' });
    const applied = await appliedPerId(consumer);
    expect([...applied].filter(([, n]) => n !== 1)).toEqual([]);
    expect([...applied.keys()].sort()).toEqual([...ids].sort());
  }, 240_000);
});
