// Process crashes against real RabbitMQ and Postgres: a consumer process SIGKILLed mid-stream and started
// again applies every message exactly once; the messages a killed process had received but not started cost
// no attempt, though a quorum queue counts a delivery for each; a message that kills its process every time
// reaches the DLQ after maxAttempts + 1 deaths, counted by the inbox (a started attempt recorded before every
// redelivery runs), on quorum and classic queues alike.

import { HEADERS } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';
import { startConsumerProcess } from './consumer-process.js';
import type { ConsumerProcess } from './consumer-process.js';
import type { ConsumerProcessConfig } from './fixtures/consumer-process.js';
import { postgresFixture } from './postgres-fixture.js';
import type { PostgresFixture } from './postgres-fixture.js';
import { rabbitmqHarness, TEST_TOPOLOGY } from './rabbitmq-harness.js';
import type { RabbitmqHarness } from './rabbitmq-harness.js';

useSharedBroker();

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function setup(label: string, topology = TEST_TOPOLOGY) {
  const h: RabbitmqHarness = await rabbitmqHarness({ topology });
  cleanup.push(() => h.dispose());
  const pg: PostgresFixture = await postgresFixture(label);
  cleanup.push(() => pg.dispose());
  const config = (over: Partial<ConsumerProcessConfig> = {}): ConsumerProcessConfig => ({
    amqpUrl: amqpUrl(),
    databaseUrl: pg.url,
    schema: pg.schema,
    queue: h.queue,
    consumer: label,
    concurrency: 8,
    maxAttempts: 3,
    topology,
    handlerDelayMs: 0,
    ...over,
  });
  const start = async (over?: Partial<ConsumerProcessConfig>): Promise<ConsumerProcess> => {
    const p = await startConsumerProcess(config(over));
    cleanup.push(() => p.kill());
    return p;
  };
  return { h, pg, start };
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What the DLQ holds, as `id reason` lines (taken off the queue). */
async function deadLetters(h: RabbitmqHarness): Promise<string[]> {
  const letters = await h.readDeadLetters(await h.messageCount(`${h.queue}.dlq`), 5_000);
  return letters.map((l) => `${l.id ?? '(no id)'} ${l.headers[HEADERS.reason] ?? '?'}`);
}

describe('consumer process crashes', () => {
  it('SIGKILLed mid-stream twice and restarted: every message applied exactly once, none missing', async () => {
    const { h, pg, start } = await setup('sigkill');
    const ids = Array.from({ length: 1_500 }, (_, n) => `order-${n}`);
    await h.publish(ids.map((id, n) => ({ id, body: JSON.stringify({ n }) })));

    const applied = async () => [...(await pg.effectCounts()).values()].reduce((a, b) => a + b, 0);
    for (const killAt of [300, 800]) {
      const p = await start({ handlerDelayMs: 2 });
      await until(async () => (await applied()) >= killAt, `${killAt} effects`);
      expect(await p.kill('SIGKILL')).toBe('SIGKILL');
    }
    const last = await start({ handlerDelayMs: 0 });
    await until(async () => (await pg.effectCounts()).size === ids.length, 'every id applied');
    await until(async () => (await h.messageCount(h.queue)) === 0, 'an empty queue');

    const counts = await pg.effectCounts();
    const doubled = [...counts].filter(([, n]) => n !== 1);
    expect(doubled, 'ids applied more than once').toEqual([]);
    expect(
      ids.filter((id) => !counts.has(id)),
      'ids never applied',
    ).toEqual([]);
    expect(await pg.inboxStatuses()).toEqual({ completed: ids.length });
    expect(await deadLetters(h)).toEqual([]);
    await last.kill('SIGTERM');
  });

  it('a process killed three times holding messages it had not started costs them no attempt (quorum queue, prefetch 10, three copies of each id)', async () => {
    const { h, pg, start } = await setup('buffered');
    const ids = Array.from({ length: 10 }, (_, n) => `buffered-${n}`);
    // Three copies of each id (a producer's duplicates): redelivered together, they must not count three
    // attempts of their id between them.
    await h.publish(ids.flatMap((id, n) => [0, 1, 2].map(() => ({ id, body: JSON.stringify({ n }) }))));
    const applied = async () => (await pg.effectCounts()).size;
    for (let round = 1; round <= 3; round += 1) {
      // One handler, slow; the broker pushes all ten at once: a kill finds one running and the rest waiting,
      // and returns them all with x-delivery-count + 1.
      const p = await start({ concurrency: 1, prefetch: 10, maxAttempts: 2, handlerDelayMs: 300 });
      const before = await applied();
      // (Or a dead letter: were the waiting messages charged for the kills, they would be dead-lettered
      // instead of run.)
      await until(
        async () => (await applied()) > before || (await h.messageCount(`${h.queue}.dlq`)) > 0,
        `round ${round}: one more effect`,
      );
      expect(await p.kill('SIGKILL')).toBe('SIGKILL');
    }
    expect(await applied()).toBeLessThan(ids.length);
    const last = await start({ concurrency: 6, maxAttempts: 2 });
    await until(async () => (await h.messageCount(h.queue)) === 0, 'an empty queue');
    await until(
      async () => (await applied()) + (await h.messageCount(`${h.queue}.dlq`)) >= ids.length,
      'every id settled',
    );
    const counts = await pg.effectCounts();
    expect(
      ids.filter((id) => counts.get(id) !== 1),
      'ids not applied exactly once',
    ).toEqual([]);
    expect(await deadLetters(h), 'healthy messages dead-lettered').toEqual([]);
    await last.kill('SIGTERM');
  });

  it(
    'a process killed as soon as it applies anything, six times over, dead-letters nothing: the redelivered messages run one at a time, so a kill charges at most one of them (maxAttempts 2, four handlers)',
    { timeout: 180_000 },
    async () => {
      const { h, pg, start } = await setup('busykill');
      const ids = Array.from({ length: 24 }, (_, n) => `busykill-${n}`);
      await h.publish(ids.map((id, n) => ({ id, body: JSON.stringify({ n }) })));
      const applied = async () => (await pg.effectCounts()).size;
      for (let round = 1; round <= 6; round += 1) {
        // Four handlers of 100–600 ms and a prefetch of 12: a kill right after the first effect commits finds
        // the others running. Each round's process receives the previous one's unsettled messages again first,
        // redelivered; were they run together, the slow ones would be charged an attempt at every kill.
        const p = await start({
          concurrency: 4,
          prefetch: 12,
          maxAttempts: 2,
          handlerDelayMs: 100,
          handlerJitterMs: 500,
        });
        const before = await applied();
        await until(
          async () => (await applied()) > before || (await h.messageCount(`${h.queue}.dlq`)) > 0,
          `round ${round}: one more effect`,
        );
        expect(await p.kill('SIGKILL')).toBe('SIGKILL');
      }
      const last = await start({ concurrency: 4, maxAttempts: 2 });
      await until(async () => (await h.messageCount(h.queue)) === 0, 'an empty queue');
      await until(
        async () => (await applied()) + (await h.messageCount(`${h.queue}.dlq`)) >= ids.length,
        'every id settled',
      );
      expect(await deadLetters(h), 'healthy messages dead-lettered').toEqual([]);
      const counts = await pg.effectCounts();
      expect(
        ids.filter((id) => counts.get(id) !== 1),
        'ids not applied exactly once',
      ).toEqual([]);
      await last.kill('SIGTERM');
    },
  );

  for (const queueType of ['quorum', 'classic'] as const) {
    it(`a message that kills its process every time reaches the DLQ after maxAttempts + 1 deaths (${queueType} queue)`, async () => {
      const topology = {
        ...TEST_TOPOLOGY,
        queueType,
        deliveryLimit: queueType === 'quorum' ? TEST_TOPOLOGY.deliveryLimit : undefined,
      };
      const { h, pg, start } = await setup(`crashloop_${queueType}`, topology);
      const poison = uniqueName('poison');
      const others = ['a', 'b', 'c'].map((x) => uniqueName(x));
      await h.publish([
        { id: others[0]!, body: '{}' },
        { id: poison, body: JSON.stringify({ crash: true }) },
        ...others.slice(1).map((id) => ({ id, body: '{}' })),
      ]);
      let crashes = 0;
      // Restart the process whenever it dies, as a supervisor would, until the poison is dead-lettered.
      for (;;) {
        const p = await start({ concurrency: 1 });
        const settled = async () =>
          (await h.messageCount(`${h.queue}.dlq`)) === 1 && (await pg.effectCounts()).size === others.length;
        const outcome = await Promise.race([
          p.exited,
          until(settled, 'the poison in the DLQ and the others applied', 30_000).then(() => 'drained'),
        ]);
        if (outcome === 'drained') {
          await p.kill('SIGTERM');
          break;
        }
        crashes++;
        expect(crashes, 'the crash loop never ended').toBeLessThanOrEqual(6);
      }
      const [letter, ...more] = await h.readDeadLetters(1, 10_000);
      expect(more).toEqual([]);
      expect(letter?.id).toBe(poison);
      expect(letter?.headers[HEADERS.reason]).toBe('max-attempts');
      expect(letter?.headers[HEADERS.consumer]).toBe(`crashloop_${queueType}`);
      expect(letter?.headers[HEADERS.sourceDestination]).toBe(h.queue);
      // The first crash, on the first delivery, is counted nowhere (x-delivery-count is not an attempt count:
      // it also counts messages returned unstarted); every redelivery records a started attempt before it
      // runs. So maxAttempts + 1 deaths, then the claim dead-letters it without running it.
      expect(crashes).toBe(4);
      const counts = await pg.effectCounts();
      expect(others.map((id) => counts.get(id))).toEqual([1, 1, 1]);
      expect(counts.has(poison)).toBe(false);
    });
  }
});
