// Edit and retry for a consumer with a `fingerprint` option (here `exclude: ['sentAt']`), on real RabbitMQ and
// Postgres: the amended fingerprint must be the one the consumer computes for the corrected payload, or the
// replay is dead-lettered again as `payload-mismatch`. The application's `--schemas` module exports the
// consumers' `fingerprints` beside their schemas, and `dlq edit` fingerprints the edit with them.

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

describe("dlq edit with the consumer's fingerprint option (RabbitMQ, real consumer and Postgres)", () => {
  let world: ConsoleWorld;
  const dir = mkdtempSync(join(tmpdir(), 'inboxkit-edit-fp-'));
  const module = join(import.meta.dirname, 'support', 'order-fingerprints.ts');

  beforeAll(async () => {
    world = await consoleWorld({ fingerprint: { exclude: ['sentAt'] } });
    await world.broker.publish([
      { id: 'fp-1', body: JSON.stringify({ orderId: 'fp-1', amountCents: -100, sentAt: '2026-12-05T03:00:00Z' }) },
    ]);
    await eventually(
      async () => (await world.broker.dlqDepth()) === 1,
      async () => `DLQ depth ${await world.broker.dlqDepth()}`,
      60_000,
    );
  }, 120_000);
  afterAll(async () => {
    await world?.dispose();
  });

  it('amends the row to the fingerprint the consumer computes, so the corrected payload (a new sentAt too) is applied once', { timeout: 120_000 }, async () => {
    const file = join(dir, 'payload.json');
    const corrected = { orderId: 'fp-1', amountCents: 100, sentAt: '2026-12-05T04:00:00Z' };
    writeFileSync(file, JSON.stringify(corrected));
    const seen = world.recorder.events.length;
    const io = captureIo({ env: { USER: 'edit-test' } });
    const code = await runCli(
      [
        'dlq', 'edit', '--transport', 'rabbitmq', '--from', world.broker.dlq, '--amqp-url', requireService('AMQP_URL'),
        '--consumer', 'orders', '--id', 'fp-1', '--payload-file', file, '--reason', 'the amount was entered negative',
        '--schemas', module, '--json',
        '--database-url', requireService('DATABASE_URL'), '--schema', world.database.schema,
      ],
      io.io,
    );
    expect(io.stderr()).toBe('');
    expect(code).toBe(0);
    const result = JSON.parse(io.stdout()) as { kind: string; amended: boolean; toFingerprint: string };
    // The consumer's identity of the corrected payload: sentAt left out.
    expect(result).toMatchObject({ kind: 'replayed', amended: true, toFingerprint: fingerprintPayload({ orderId: 'fp-1', amountCents: 100 }) });
    // The replay's outcome (the events before it hold the first delivery's dead letter).
    const settled = () =>
      world.recorder.events.slice(seen).find((e) => e.outcome.messageId === 'fp-1' && ['processed', 'dead-letter'].includes(e.outcome.status));
    await eventually(
      async () => settled() !== undefined,
      async () => `no outcome of the replay yet: ${JSON.stringify(world.recorder.events.slice(seen).map((e) => e.outcome.status))}`,
      60_000,
    );
    expect(settled()!.outcome).toMatchObject({ status: 'processed' });
    expect((await world.database.effects()).get('fp-1')).toBe(1);
  });

  it('refuses a module whose fingerprints are not fingerprint options, naming the consumer', async () => {
    const bad = join(dir, 'bad-fingerprints.mjs');
    writeFileSync(bad, "export const schemas = {};\nexport const fingerprints = { orders: { exclude: 'sentAt' } };\n");
    const file = join(dir, 'payload-2.json');
    writeFileSync(file, '{"orderId":"fp-1","amountCents":1}');
    const io = captureIo({ env: { USER: 'edit-test' } });
    const code = await runCli(
      [
        'dlq', 'edit', '--transport', 'rabbitmq', '--from', world.broker.dlq, '--amqp-url', requireService('AMQP_URL'),
        '--consumer', 'orders', '--id', 'fp-1', '--payload-file', file, '--reason', 'x', '--schemas', bad,
        '--database-url', requireService('DATABASE_URL'), '--schema', world.database.schema,
      ],
      io.io,
    );
    expect(code).toBe(3);
    expect(io.stderr()).toMatch(/fingerprints\.orders\.exclude must be a non-empty array of dot paths/);
  });
});
