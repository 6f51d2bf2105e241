// The console over a Kafka DLQ, with the console on each Kafka client (kafkajs, @platformatic/kafka), real
// Postgres and a real consumer (issue #36): it lists the DLQ without consuming it, shows a dead letter's
// detail and prediction, and its replay applies each dead letter once; copies replayed again are duplicates;
// edit and retry of a dead letter the schema refused applies the corrected payload once.

import type { DeadLetterEntry } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ConsoleServer } from '../../src/console/console-server.js';
import type { ReplayJobView } from '../../src/console/replay-jobs.js';
import { CONSOLE_BROKERS, consoleWorld } from '../support/console-fixture.js';
import type { ConsoleWorld } from '../support/console-fixture.js';
import { eventually } from '../support/eventually.js';

interface Listed {
  dlq: string;
  listing: string;
  nonDestructiveBrowse: boolean;
  entries: {
    id: string;
    position: string;
    consumer: string;
    reason: string;
    error: string;
    inboxStatus: string;
    prediction: string;
  }[];
}

const KAFKA = CONSOLE_BROKERS.filter((b) => b.transport === 'kafka');
const bodyOf = (id: string, amountCents: number) => JSON.stringify({ orderId: id, amountCents });

describe.each(KAFKA)('the console over a Kafka DLQ ($label, real Postgres and consumer)', (on) => {
  let world: ConsoleWorld;
  let server: ConsoleServer;
  let snapshot: DeadLetterEntry[];
  const post = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
      body: JSON.stringify(body),
    });
  const list = async (): Promise<Listed> => {
    const response = await post('api/dead-letters', { dlq: world.dlqId });
    expect(response.status, await response.clone().text()).toBe(200);
    return (await response.json()) as Listed;
  };
  const dlqHolds = (n: number) =>
    eventually(
      async () => (await world.broker.dlqDepth()) === n,
      async () => `DLQ depth ${await world.broker.dlqDepth()}, expected ${n}`,
      60_000,
    );
  /** Starts a replay and waits for its job to finish. */
  const replay = async (selection: Record<string, unknown>): Promise<ReplayJobView> => {
    const started = await post('api/replays', { dlq: world.dlqId, ...selection });
    expect(started.status, await started.clone().text()).toBe(202);
    const { id } = (await started.json()) as ReplayJobView;
    let view: ReplayJobView | undefined;
    await eventually(
      async () => {
        view = (await (await fetch(`${server.url}api/replays/${id}`)).json()) as ReplayJobView;
        return view.state !== 'running';
      },
      async () => `replay ${id} still running`,
      60_000,
    );
    return view!;
  };

  beforeAll(async () => {
    world = await consoleWorld({ broker: on });
    world.refused.add('kc-1');
    world.refused.add('kc-2');
    await world.publish(
      [
        { id: 'kc-1', amountCents: 100 },
        { id: 'kc-2', amountCents: 200 },
        { id: 'kc-3', amountCents: 300 },
      ],
      2,
    );
    await world.recorder.waitForCount(1, { status: 'processed', timeoutMs: 60_000 });
    snapshot = await world.broker.deadLetters();
    server = await world.console();
  }, 180_000);

  afterAll(async () => {
    await world?.dispose();
  });

  it('lists the Kafka DLQ without consuming it, and shows a dead letter with its prediction', async () => {
    expect(world.dlqId).toBe(`kafka:${world.broker.dlq}`);
    const overview = (await (await fetch(`${server.url}api/overview`)).json()) as {
      dlqs: { id: string; transport: string; name: string }[];
    };
    expect(overview.dlqs).toEqual([{ id: world.dlqId, transport: 'kafka', name: world.broker.dlq }]);

    const listed = await list();
    expect(listed.dlq).toBe(world.dlqId);
    expect(listed.nonDestructiveBrowse).toBe(true);
    expect(listed.entries.map((e) => e.id).sort()).toEqual(['kc-1', 'kc-2']);
    for (const e of listed.entries) {
      expect(e).toMatchObject({
        consumer: 'orders',
        reason: 'permanent-error',
        inboxStatus: 'dead_lettered',
        prediction: 'reopen',
      });
      expect(e.error).toContain(`order ${e.id} refused: card declined`);
    }
    // Read without consuming: the replay group has removed nothing.
    expect(await world.broker.dlqDepth()).toBe(2);

    const entry = listed.entries.find((e) => e.id === 'kc-1')!;
    const response = await fetch(
      `${server.url}api/message?${new URLSearchParams({ dlq: world.dlqId, position: entry.position, listing: listed.listing })}`,
    );
    expect(response.status, await response.clone().text()).toBe(200);
    const detail = (await response.json()) as {
      dlq: string;
      consumer: string;
      id: string;
      deadLetter: { position: string; body: string; bodyTruncated: boolean; record: { reason?: string } };
      row: { status: string } | null;
      prediction: string;
      predictionText: string;
    };
    expect(detail).toMatchObject({
      dlq: world.dlqId,
      consumer: 'orders',
      id: 'kc-1',
      deadLetter: { position: entry.position, body: bodyOf('kc-1', 100), bodyTruncated: false },
      row: { status: 'dead_lettered' },
      prediction: 'reopen',
    });
    expect(detail.deadLetter.record.reason).toBe('permanent-error');
    expect(detail.predictionText).not.toBe('');

    // The dry run predicts the same and changes nothing.
    const dry = await post('api/dry-run', { dlq: world.dlqId, ids: ['kc-1', 'kc-2'] });
    expect(dry.status, await dry.clone().text()).toBe(200);
    expect(await dry.json()).toMatchObject({
      dryRun: true,
      wouldReplay: 2,
      predictions: { reopen: 2, 'skip-duplicate': 0 },
    });
    expect(await world.broker.dlqDepth()).toBe(2);
    expect((await world.database.effects()).has('kc-1')).toBe(false);
  });

  it('replays each dead letter once; copies of them replayed again are duplicates and apply nothing', async () => {
    world.refused.clear();
    const processed = world.recorder.count('processed');
    const done = await replay({ ids: ['kc-1', 'kc-2'] });
    expect(done.error).toBeUndefined();
    expect(done.state).toBe('done');
    expect(done.summary).toMatchObject({ replayed: 2, failed: 0, requestedBy: 'console-test' });
    await world.recorder.waitForCount(processed + 2, { status: 'processed', timeoutMs: 60_000 });
    await dlqHolds(0);
    const effects = await world.database.effects();
    expect(effects.get('kc-1')).toBe(1);
    expect(effects.get('kc-2')).toBe(1);
    expect((await list()).entries).toEqual([]);
    const audit = await world.database.store.listReplays({ replayId: done.summary!.replayId, limit: 10 });
    expect(audit.map((a) => a.messageId).sort()).toEqual(['kc-1', 'kc-2']);

    // Copies of the same dead letters back in the DLQ (a DLQ restored from a backup): listed as duplicates,
    // and a replay of the whole DLQ applies nothing more.
    await world.broker.restore(snapshot);
    await dlqHolds(2);
    const again = await list();
    expect(again.entries.map((e) => [e.id, e.prediction]).sort()).toEqual([
      ['kc-1', 'skip-duplicate'],
      ['kc-2', 'skip-duplicate'],
    ]);
    const duplicates = world.recorder.count('duplicate');
    const second = await replay({ all: true });
    expect(second.summary).toMatchObject({ replayed: 2, failed: 0 });
    await world.recorder.waitForCount(duplicates + 2, { status: 'duplicate', timeoutMs: 60_000 });
    await dlqHolds(0);
    expect(await world.database.effects()).toEqual(effects);
  });

  it('edit and retry corrects a dead letter the schema refused; the corrected payload is applied once', async () => {
    await world.publish([{ id: 'kc-4', amountCents: -400 }], 1);
    const edit = (amountCents: number) =>
      post('api/edit', {
        dlq: world.dlqId,
        consumer: 'orders',
        id: 'kc-4',
        payload: bodyOf('kc-4', amountCents),
        reason: 'the amount was entered negative',
      });
    const refused = await edit(-1);
    expect(refused.status).toBe(422);
    expect(((await refused.json()) as { error: string }).error).toMatch(
      /does not match the schema: amountCents/,
    );
    expect(await world.broker.dlqDepth()).toBe(1);

    const processed = world.recorder.count('processed');
    const done = await edit(400);
    expect(done.status, await done.clone().text()).toBe(200);
    expect(await done.json()).toMatchObject({ kind: 'replayed', amended: true });
    await world.recorder.waitForCount(processed + 1, { status: 'processed', timeoutMs: 60_000 });
    await dlqHolds(0);
    expect((await world.database.effects()).get('kc-4')).toBe(1);
    const [row] = await world.database.store.findRows('orders', ['kc-4']);
    expect(row?.status).toBe('completed');
  });
});
