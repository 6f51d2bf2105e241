// DLQ replay end to end on RabbitMQ: the shared replay suite, plus a replay killed half-way (SIGKILL of the
// real `inboxkit` process) and run again.

import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { eventually } from './support/eventually.js';
import { effectConsumer, inboxDatabase } from './support/inbox-database.js';
import type { InboxDatabase } from './support/inbox-database.js';
import { rabbitmqFixture } from './support/rabbitmq-fixture.js';
import type { ReplayFixture } from './support/replay-fixture.js';
import { describeReplaySuite } from './support/replay-suite.js';
import { REPO_ROOT, requireService } from './support/services.js';

describeReplaySuite('RabbitMQ', rabbitmqFixture);

describe('a replay killed half-way (RabbitMQ)', () => {
  let database: InboxDatabase;
  let f: ReplayFixture;
  beforeAll(async () => {
    database = await inboxDatabase();
    f = await rabbitmqFixture();
  });
  afterAll(async () => {
    await f?.dispose();
    await database?.dispose();
  });

  it('loses nothing, and the rerun ends with every message applied once', async () => {
    const { consumer, recorder, failing } = effectConsumer(database, 'killed');
    const all = Array.from({ length: 40 }, (_, i) => `kill-${i + 1}`);
    all.forEach((id) => failing.add(id));
    await f.start(consumer);
    await f.publish(all.map((id) => ({ id, body: '{}' })));
    await recorder.waitForCount(40, { status: 'dead-letter', timeoutMs: 30_000 });
    await eventually(
      async () => (await f.dlqDepth()) === 40,
      async () => `DLQ depth ${await f.dlqDepth()}`,
    );
    failing.clear();

    const args = [
      'dlq',
      'replay',
      '--transport',
      'rabbitmq',
      '--from',
      f.dlq,
      ...f.cliArgs,
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      database.schema,
    ];
    // The real bin, slowed down by --rate so it is mid-run when it dies.
    const child = spawn(
      process.execPath,
      [join(REPO_ROOT, 'packages/cli/bin/inboxkit.js'), ...args, '--rate', '10/s'],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, USER: 'kill-test' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if ((stderr.match(/^\[\d+\] replayed /gm) ?? []).length >= 15) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      void exited.then(() => reject(new Error(`the replay ended before it could be killed:\n${stderr}`)));
    });
    expect(await exited).toBe('SIGKILL');
    const replayedBeforeKill = (stderr.match(/^\[\d+\] replayed /gm) ?? []).length;
    expect(replayedBeforeKill).toBeGreaterThanOrEqual(15);
    expect(replayedBeforeKill).toBeLessThan(40);

    // Nothing lost: what the killed run did not remove is still in the DLQ (the broker returned the unacked one).
    await eventually(
      async () => (await f.dlqDepth()) >= 40 - replayedBeforeKill - 1,
      async () => `DLQ depth ${await f.dlqDepth()}`,
    );

    const rerun = captureIo({ env: { USER: 'kill-test' } });
    expect(await runCli(args, rerun.io)).toBe(0);
    await eventually(
      async () => (await database.effects()).size === 40,
      async () => `effects for ${(await database.effects()).size} ids; outcomes:\n${recorder.describe()}`,
    );
    await eventually(
      async () => (await f.dlqDepth()) === 0,
      async () => `DLQ depth ${await f.dlqDepth()}`,
    );
    const effects = await database.effects();
    expect([...effects.values()].every((n) => n === 1)).toBe(true);
    expect(recorder.count('processed')).toBe(40);
    await f.stop();
  });
});
