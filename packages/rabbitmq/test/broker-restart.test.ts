// RabbitMQ restarted mid-run (the real server, stopped and started by the services script): the consumer
// reconnects, declares its topology again and resumes; every message, including retries waiting in delay
// queues across the restart, is applied exactly once and none is lost.

import { idempotentConsumer, RetryableError } from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareTopology, rabbitmqConsumer } from '../src/index.js';
import type { DeclaredTopology } from '../src/index.js';
import { amqpUrl, restartRabbitmq } from './amqp-service.js';
import { stopService } from '../../../test/support/services.js';
import { exclusiveBrokerLock } from './broker-lock.js';
import { insertEffect, postgresFixture } from './postgres-fixture.js';
import type { EffectsDatabase, PostgresFixture } from './postgres-fixture.js';
import { TEST_TOPOLOGY } from './rabbitmq-harness.js';

let release: (() => void) | undefined;
beforeAll(async () => {
  release = await exclusiveBrokerLock();
}, 240_000);
afterAll(() => release?.());

async function publish(topology: DeclaredTopology, ids: readonly string[]): Promise<void> {
  const connection = await amqp.connect(amqpUrl());
  const channel = await connection.createConfirmChannel();
  for (const id of ids)
    channel.sendToQueue(topology.queue, Buffer.from('{}'), { messageId: id, persistent: true });
  await channel.waitForConfirms();
  await connection.close();
}

async function depth(queues: readonly string[]): Promise<number> {
  const connection = await amqp.connect(amqpUrl());
  const channel = await connection.createChannel();
  let total = 0;
  for (const q of queues) total += (await channel.checkQueue(q)).messageCount;
  await connection.close();
  return total;
}

describe('broker restart', () => {
  let pg: PostgresFixture;
  let topology: DeclaredTopology;

  beforeAll(async () => {
    pg = await postgresFixture('restart');
    const connection = await amqp.connect(amqpUrl());
    topology = await declareTopology(await connection.createChannel(), {
      ...TEST_TOPOLOGY,
      queue: uniqueName('restart'),
    });
    await connection.close();
  });

  afterAll(async () => {
    const connection = await amqp.connect(amqpUrl());
    const ch = await connection.createChannel();
    for (const q of [
      topology.queue,
      topology.deadLetterQueue,
      ...topology.delayBucketsMs.map((b) => topology.delayQueue(b)),
    ]) {
      await ch.deleteQueue(q);
    }
    await ch.deleteExchange(topology.deadLetterExchange);
    await connection.close();
    await pg.dispose();
  });

  it(
    'reconnects after the broker restarts mid-run: nothing lost, nothing doubled',
    { timeout: 300_000 },
    async () => {
      const lines: string[] = [];
      const logger: Logger = {
        debug: () => undefined,
        info: (_o, msg) => void lines.push(msg ?? ''),
        warn: (_o, msg) => void lines.push(msg ?? ''),
        error: (_o, msg) => void lines.push(msg ?? ''),
      };
      const name = uniqueName('restart');
      const effect = insertEffect(pg.schema, name);
      const firstAttemptFails = (id: string) => Number(id.split('-')[1]) % 10 === 0;
      // The restart must come mid-run, whatever the load: stopping and starting a RabbitMQ node takes seconds
      // (its CLI boots for each step), and the consumer, reconnected as soon as the port opens, could apply every
      // message before the restart returns. Once the restart is under way, handlers wait until it has returned
      // and been checked, then run on, those caught by it against the dropped connection.
      let restarting = false;
      let resume: () => void = () => undefined;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
        name,
        store: pg.store,
        backoff: { initialDelayMs: 250, multiplier: 2, maxDelayMs: 1_000, jitter: 'none' },
        // Room for the wait above (the node's restart) on a loaded machine.
        handlerTimeoutMs: 170_000,
        handler: async (message, context) => {
          if (restarting) await resumed;
          await new Promise((r) => setTimeout(r, 10));
          // Every tenth message waits in a delay queue once, some of them across the restart.
          if (context.attempt === 1 && firstAttemptFails(message.id))
            throw new RetryableError('later', { delayMs: 1_000 });
          await effect(message, context);
        },
      });
      const before = Array.from({ length: 1_500 }, (_, n) => `before-${n}`);
      const after = Array.from({ length: 200 }, (_, n) => `after-${n}`);
      await publish(topology, before);

      const transport = rabbitmqConsumer({
        connect: () => amqp.connect(amqpUrl()),
        queue: topology.queue,
        handler: consumer,
        concurrency: 4,
        topology: TEST_TOPOLOGY,
        reconnect: { initialDelayMs: 200, maxDelayMs: 1_000 },
        logger,
      });
      await transport.start();
      const applied = async () => (await pg.effectCounts()).size;
      await expect.poll(applied, { timeout: 60_000, interval: 50 }).toBeGreaterThanOrEqual(200);
      restarting = true;
      try {
        await restartRabbitmq();
        expect(await applied(), 'the restart came too late to test anything').toBeLessThan(before.length);
      } finally {
        resume();
      }
      await publish(topology, after);

      const all = [...before, ...after];
      await expect.poll(applied, { timeout: 90_000, interval: 200 }).toBe(all.length);
      const counts = await pg.effectCounts();
      expect(
        [...counts].filter(([, n]) => n !== 1),
        'ids applied more than once',
      ).toEqual([]);
      expect(
        all.filter((id) => !counts.has(id)),
        'ids never applied',
      ).toEqual([]);
      expect(lines).toContain('rabbitmq consumer reconnected');
      const queues = [
        topology.queue,
        topology.deadLetterQueue,
        ...topology.delayBucketsMs.map((b) => topology.delayQueue(b)),
      ];
      await expect.poll(() => depth(queues), { timeout: 30_000 }).toBe(0);
      await transport.stop();
      expect(await pg.inboxStatuses()).toEqual({ completed: all.length });
    },
  );
  it(
    'a consumer started while the broker is down becomes ready once it is up, and applies every message once',
    { timeout: 240_000 },
    async () => {
      const warnings: unknown[] = [];
      const logger: Logger = {
        debug: () => undefined,
        info: () => undefined,
        warn: (o) => void warnings.push(o),
        error: () => undefined,
      };
      const name = uniqueName('down-at-start');
      const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
        name,
        store: pg.store,
        handler: insertEffect(pg.schema, name),
      });
      const ids = Array.from({ length: 100 }, (_, n) => `down-${n}`);
      await publish(topology, ids);
      const before = (await pg.effectCounts()).size;
      await stopService('rabbitmq');
      const transport = rabbitmqConsumer({
        connect: () => amqp.connect(amqpUrl()),
        queue: topology.queue,
        handler: consumer,
        concurrency: 4,
        topology: TEST_TOPOLOGY,
        reconnect: { initialDelayMs: 100, maxDelayMs: 500 },
        logger,
      });
      let ready = false;
      const started = transport.start().then(() => {
        ready = true;
      });
      try {
        await expect.poll(() => warnings.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
        expect(ready).toBe(false);
      } finally {
        // Start it again whatever happened: the other chaos tests need it.
        await restartRabbitmq();
      }
      await started;
      await expect
        .poll(async () => (await pg.effectCounts()).size - before, { timeout: 60_000 })
        .toBe(ids.length);
      await transport.stop();
      const counts = await pg.effectCounts();
      expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
    },
  );
});
