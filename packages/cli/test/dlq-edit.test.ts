// Edit and retry and forget one id from the command line, on real RabbitMQ, and real Kafka with the CLI on
// each Kafka client (--kafka-client kafkajs | platformatic), and real Postgres with a real consumer (a zod schema): an edit that fails the schema is refused with the schema's message and changes nothing; a
// valid edit is amended (audited) and applied once, while another payload stays payload-mismatch; forget
// deletes one completed row (audited) so the next delivery is applied again, and leaves other states alone.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { parseOperatorAudit } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { CONSOLE_BROKERS, consoleWorld } from './support/console-fixture.js';
import type { ConsoleWorld } from './support/console-fixture.js';
import { eventually } from './support/eventually.js';
import { requireService } from './support/services.js';

describe.each(CONSOLE_BROKERS)('dlq edit and forget ($label, real consumer and Postgres)', (on) => {
  let world: ConsoleWorld;
  const dir = mkdtempSync(join(tmpdir(), 'inboxkit-edit-'));
  const schemasModule = join(import.meta.dirname, 'support', 'order-schemas.ts');

  beforeAll(async () => {
    world = await consoleWorld({ broker: on });
    await world.publish(
      [
        { id: 'ed-1', amountCents: -100 },
        { id: 'ed-2', amountCents: 250 },
      ],
      1,
    );
    await world.recorder.waitForCount(1, { status: 'processed', timeoutMs: 30_000 });
  }, 120_000);
  afterAll(async () => {
    await world?.dispose();
  });

  const cli = async (argv: string[]): Promise<{ code: number; out: string; err: string }> => {
    const io = captureIo({ env: { USER: 'edit-test' } });
    const code = await runCli(
      [...argv, '--database-url', requireService('DATABASE_URL'), '--schema', world.database.schema],
      io.io,
    );
    return { code, out: io.stdout(), err: io.stderr() };
  };
  const edit = (payload: unknown, reason: string, ...extra: string[]) => {
    const file = join(dir, `payload-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, typeof payload === 'string' ? payload : JSON.stringify(payload));
    return cli([
      'dlq',
      'edit',
      '--transport',
      world.broker.transport,
      '--from',
      world.broker.dlq,
      ...world.broker.cliArgs,
      '--consumer',
      'orders',
      '--id',
      'ed-1',
      '--payload-file',
      file,
      '--reason',
      reason,
      '--schemas',
      schemasModule,
      ...extra,
    ]);
  };
  const audit = async (id: string) => world.database.store.listReplays({ consumer: 'orders', messageId: id });

  it("refuses an edit that fails the consumer's schema with the schema's message, and changes nothing", async () => {
    const [before] = await world.database.store.findRows('orders', ['ed-1']);
    const refused = await edit({ orderId: 'ed-1', amountCents: -5 }, 'try again');
    expect(refused.code).toBe(1);
    expect(refused.out).toMatch(
      /^Refused: the edited payload is refused: the payload does not match the schema: amountCents: /,
    );
    const notJson = await edit('{"orderId": ', 'typo');
    expect(notJson.out).toMatch(/Refused: the edited payload is refused: the body is not JSON/);
    expect(await world.database.store.findRows('orders', ['ed-1'])).toEqual([before]);
    expect(await audit('ed-1')).toEqual([]);
    expect(await world.broker.dlqDepth()).toBe(1);
  });

  it('replays the corrected payload once, audited; another payload sent without the act stays payload-mismatch', async () => {
    const [before] = await world.database.store.findRows('orders', ['ed-1']);
    const processed = world.recorder.count('processed');
    const done = await edit(
      { orderId: 'ed-1', amountCents: 100 },
      'the amount was entered negative',
      '--json',
    );
    expect(done.code).toBe(0);
    const result = JSON.parse(done.out) as {
      kind: string;
      amended: boolean;
      fromFingerprint: string;
      toFingerprint: string;
      replayId: string;
    };
    expect(result).toMatchObject({ kind: 'replayed', amended: true, fromFingerprint: before!.fingerprint });
    await world.recorder.waitForCount(processed + 1, { status: 'processed', timeoutMs: 30_000 });
    expect((await world.database.effects()).get('ed-1')).toBe(1);
    await eventually(
      async () => (await world.broker.dlqDepth()) === 0,
      async () => `DLQ depth ${await world.broker.dlqDepth()}`,
    );
    const lines = await audit('ed-1');
    const amendment = lines.find((l) => parseOperatorAudit(l.outcome)?.action === 'amended');
    expect(amendment).toMatchObject({ replayId: result.replayId, requestedBy: 'edit-test' });
    expect(parseOperatorAudit(amendment!.outcome)).toEqual({
      action: 'amended',
      fromFingerprint: before!.fingerprint,
      toFingerprint: result.toFingerprint,
      reason: 'the amount was entered negative',
    });
    expect(
      lines.some((l) => l.replayId === result.replayId && l.outcome.startsWith('replayed:processed')),
    ).toBe(true);

    // Another valid payload under the same id, without the audited act: refused, not applied.
    const deadLettered = world.recorder.count('dead-letter');
    await world.broker.publish([{ id: 'ed-1', body: JSON.stringify({ orderId: 'ed-1', amountCents: 999 }) }]);
    await world.recorder.waitForCount(deadLettered + 1, { status: 'dead-letter', timeoutMs: 30_000 });
    expect(world.recorder.events.at(-1)?.outcome).toMatchObject({
      status: 'dead-letter',
      reason: 'payload-mismatch',
    });
    expect((await world.database.effects()).get('ed-1')).toBe(1);
    // A second edit finds the row completed: refused, nothing published.
    const again = await edit({ orderId: 'ed-1', amountCents: 200 }, 'again');
    expect(again.code).toBe(1);
    expect(again.out).toMatch(
      /ed-1 is completed in consumer orders: it was applied already; forget it first/,
    );
    expect((await world.database.effects()).get('ed-1')).toBe(1);
  });

  it('forget deletes one completed row, audited, so the next delivery is applied again; other states are left alone', async () => {
    const forget = (id: string, reason = 'reprocess after the price fix') =>
      cli(['forget', '--consumer', 'orders', '--id', id, '--reason', reason]);
    const [row] = await world.database.store.findRows('orders', ['ed-2']);
    const done = await forget('ed-2');
    expect(done.code).toBe(0);
    expect(done.out).toMatch(
      /^Forgot ed-2 \(consumer orders\): its completed row is deleted, audited under /,
    );
    expect(await world.database.store.findRows('orders', ['ed-2'])).toEqual([]);
    const [line] = await audit('ed-2');
    expect(line).toMatchObject({ requestedBy: 'edit-test' });
    expect(parseOperatorAudit(line!.outcome)).toEqual({
      action: 'forgotten',
      fingerprint: row!.fingerprint,
      reason: 'reprocess after the price fix',
    });
    const processed = world.recorder.count('processed');
    await world.broker.publish([{ id: 'ed-2', body: JSON.stringify({ orderId: 'ed-2', amountCents: 250 }) }]);
    await world.recorder.waitForCount(processed + 1, { status: 'processed', timeoutMs: 30_000 });
    expect((await world.database.effects()).get('ed-2')).toBe(2);

    // A dead letter, or an id with no row, is not forgotten.
    await world.publish([{ id: 'ed-3', amountCents: -1 }], 1);
    const dead = await forget('ed-3');
    expect(dead.code).toBe(1);
    expect(dead.out).toMatch(/ed-3 \(consumer orders\) is dead_lettered; only a completed row is forgotten/);
    expect((await forget('nope')).out).toMatch(/has no inbox row/);
    expect(await world.database.store.findRows('orders', ['ed-3'])).toMatchObject([
      { status: 'dead_lettered' },
    ]);
  });
});
