// `dlq list` and `dlq replay --dry-run` predict a `payload-mismatch` copy's fate with the consumer's
// `fingerprint` option from the `--schemas` module's `fingerprints`, on real RabbitMQ and Postgres with a real
// consumer that leaves `sentAt` out of its fingerprint. The scene: an order is dead-lettered (its negative
// amount refused by the schema), the
// producer resends it corrected with a new `sentAt` — dead-lettered `payload-mismatch` against the refused
// body — and the operator amends the row to the corrected order (as `dlq edit` does). Replaying the resend is
// then a reopen for the consumer (only `sentAt` differs, which it leaves out); fingerprinting the whole payload
// predicted `payload-mismatch`. The real replay settles it: processed once.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { fingerprintPayload } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { consoleWorld } from './support/console-fixture.js';
import type { ConsoleWorld } from './support/console-fixture.js';
import { eventually } from './support/eventually.js';
import { requireService } from './support/services.js';

interface Predicted {
  readonly id?: string;
  readonly reason?: string;
  readonly prediction: string;
}

describe("dlq list / replay --dry-run with the consumer's fingerprint option (RabbitMQ, real consumer and Postgres)", () => {
  let world: ConsoleWorld;
  const dir = mkdtempSync(join(tmpdir(), 'inboxkit-predict-fp-'));
  const exclude = join(import.meta.dirname, 'support', 'order-fingerprints.ts');
  // The function form of the option: the consumer's identity of an order is its id and amount.
  const functional = join(dir, 'function-fingerprints.mjs');
  writeFileSync(
    functional,
    [
      'export const schemas = {};',
      'export const fingerprints = {',
      '  orders: ({ payload }) => ({ orderId: payload.orderId, amountCents: payload.amountCents }),',
      '};',
      '',
    ].join('\n'),
  );

  const cli = async (args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const io = captureIo({ env: { USER: 'predict-test' } });
    const code = await runCli(
      [
        ...args,
        '--transport', 'rabbitmq', '--from', world.broker.dlq, '--amqp-url', requireService('AMQP_URL'),
        '--database-url', requireService('DATABASE_URL'), '--schema', world.database.schema,
        '--reason', 'payload-mismatch', '--json',
      ],
      io.io,
    );
    return { code, stdout: io.stdout(), stderr: io.stderr() };
  };
  const dryRun = async (...extra: string[]): Promise<Predicted[]> => {
    const run = await cli(['dlq', 'replay', '--dry-run', ...extra]);
    expect(run.code, run.stderr).toBe(0);
    return (JSON.parse(run.stdout) as { entries: Predicted[] }).entries;
  };

  beforeAll(async () => {
    world = await consoleWorld({ fingerprint: { exclude: ['sentAt'] } });
    await world.broker.publish([
      { id: 'pm-1', body: JSON.stringify({ orderId: 'pm-1', amountCents: -100, sentAt: '2026-12-05T03:00:00Z' }) },
    ]);
    await eventually(async () => (await world.broker.dlqDepth()) === 1, async () => `DLQ depth ${await world.broker.dlqDepth()}`, 60_000);
    // The producer's corrected resend under the same id: another body than the row's.
    await world.broker.publish([
      { id: 'pm-1', body: JSON.stringify({ orderId: 'pm-1', amountCents: 100, sentAt: '2026-12-05T04:00:00Z' }) },
    ]);
    await eventually(async () => (await world.broker.dlqDepth()) === 2, async () => `DLQ depth ${await world.broker.dlqDepth()}`, 60_000);
    expect(world.recorder.events.map((e) => e.outcome).filter((o) => o.messageId === 'pm-1').map((o) => o.status === 'dead-letter' && o.reason)).toEqual([
      'schema-invalid',
      'payload-mismatch',
    ]);
    // The operator's amendment (what `dlq edit` writes): the row now holds the corrected order's identity.
    const [row] = await world.database.store.findRows('orders', ['pm-1']);
    const amended = await world.database.store.amendDeadLetter({
      consumer: 'orders',
      messageId: 'pm-1',
      fromFingerprint: row!.fingerprint,
      toFingerprint: fingerprintPayload({ orderId: 'pm-1', amountCents: 100 }),
      replayId: 'predict-test-amend',
      requestedBy: 'predict-test',
      reason: 'the amount was entered negative',
    });
    expect(amended.kind).toBe('amended');
  }, 120_000);
  afterAll(async () => {
    await world?.dispose();
  });

  it('dlq replay --dry-run predicts reopen with --schemas (exclude form); the whole payload said payload-mismatch', async () => {
    expect((await dryRun()).map((e) => [e.id, e.reason, e.prediction])).toEqual([['pm-1', 'payload-mismatch', 'payload-mismatch']]);
    expect((await dryRun('--schemas', exclude)).map((e) => [e.id, e.reason, e.prediction])).toEqual([['pm-1', 'payload-mismatch', 'reopen']]);
  });

  it('takes the function form of the fingerprint option from the module', async () => {
    expect((await dryRun('--schemas', functional)).map((e) => e.prediction)).toEqual(['reopen']);
  });

  it('dlq list --schemas predicts the same', async () => {
    const run = await cli(['dlq', 'list', '--schemas', exclude]);
    expect(run.code, run.stderr).toBe(0);
    const { entries } = JSON.parse(run.stdout) as { entries: Predicted[] };
    expect(entries.map((e) => [e.id, e.reason, e.prediction])).toEqual([['pm-1', 'payload-mismatch', 'reopen']]);
  });

  it('refuses a module whose fingerprints are not fingerprint options, before reading the DLQ (exit 3)', async () => {
    const bad = join(dir, 'bad-fingerprints.mjs');
    writeFileSync(bad, "export const schemas = {};\nexport const fingerprints = { orders: { exclude: 'sentAt' } };\n");
    for (const command of [['dlq', 'list'], ['dlq', 'replay', '--dry-run']]) {
      const run = await cli([...command, '--schemas', bad]);
      expect(run.code).toBe(3);
      expect(run.stderr).toMatch(/fingerprints\.orders\.exclude must be a non-empty array of dot paths/);
    }
  });

  it("the console predicts with the consumer's fingerprint option too (listing and detail)", { timeout: 120_000 }, async () => {
    const predictions = async (fingerprints?: Record<string, { exclude: string[] }>) => {
      const server = await world.console(fingerprints === undefined ? {} : { fingerprints });
      const dlq = `rabbitmq:${world.broker.dlq}`;
      const listed = await fetch(`${server.url}api/dead-letters`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
        body: JSON.stringify({ dlq, reasons: ['payload-mismatch'] }),
      });
      expect(listed.status, await listed.clone().text()).toBe(200);
      const { listing, entries } = (await listed.json()) as {
        listing: string;
        entries: { id: string; position: string; prediction: string }[];
      };
      expect(entries.map((e) => e.id)).toEqual(['pm-1']);
      const detail = (await (
        await fetch(`${server.url}api/message?${new URLSearchParams({ dlq, position: entries[0]!.position, listing })}`)
      ).json()) as { prediction: string };
      await server.close();
      return [entries[0]!.prediction, detail.prediction];
    };
    expect(await predictions()).toEqual(['payload-mismatch', 'payload-mismatch']);
    expect(await predictions({ orders: { exclude: ['sentAt'] } })).toEqual(['reopen', 'reopen']);
  });

  it('the consumer agrees: the replayed resend is reopened and applied once', { timeout: 120_000 }, async () => {
    const seen = world.recorder.events.length;
    const run = await cli(['dlq', 'replay', '--schemas', exclude]);
    expect(run.code, run.stderr).toBe(0);
    const settled = () =>
      world.recorder.events.slice(seen).find((e) => e.outcome.messageId === 'pm-1' && ['processed', 'dead-letter'].includes(e.outcome.status));
    await eventually(
      async () => settled() !== undefined,
      async () => `no outcome of the replay yet: ${JSON.stringify(world.recorder.events.slice(seen).map((e) => e.outcome.status))}`,
      60_000,
    );
    expect(settled()!.outcome).toMatchObject({ status: 'processed' });
    expect((await world.database.effects()).get('pm-1')).toBe(1);
  });
});
