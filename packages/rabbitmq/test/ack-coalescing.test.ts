// Coalesced acks on the real broker: every ack the consumer sends — a multiple ack included — covers only
// deliveries whose outcome was already durable (the outcome hook has fired) or that were settled before, with
// handlers finishing out of order and some deliveries nacked; every message is applied once.

import { idempotentConsumer, RetryableError } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rabbitmqConsumer } from '../src/index.js';
import type { AmqpConnection } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';
import { insertEffect, postgresFixture } from './postgres-fixture.js';
import type { EffectsDatabase, PostgresFixture } from './postgres-fixture.js';
import { rabbitmqHarness, TEST_TOPOLOGY } from './rabbitmq-harness.js';
import type { RabbitmqHarness } from './rabbitmq-harness.js';

useSharedBroker();

let h: RabbitmqHarness;
let pg: PostgresFixture;

beforeAll(async () => {
  h = await rabbitmqHarness();
  pg = await postgresFixture('coalesce');
});

afterAll(async () => {
  await h?.dispose();
  await pg?.dispose();
});

describe('coalesced acks', () => {
  it('never ack a delivery whose outcome is not durable yet', async () => {
    const name = uniqueName('coalesce');
    const effect = insertEffect(pg.schema, name);
    /** Delivery tags (of the one channel) whose outcome is durable, or that were nacked. */
    const durable = new Set<number>();
    const unsettled = new Set<number>();
    const violations: string[] = [];
    let multipleAcks = 0;
    const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
      name,
      store: pg.store,
      backoff: { initialDelayMs: 1, multiplier: 1, maxDelayMs: 1, jitter: 'none' },
      handler: async (message, context) => {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 15));
        // Every fifth message fails its first attempt with no delay: nacked and requeued.
        if (context.attempt === 1 && Number(message.id.split('-')[1]) % 5 === 0)
          throw new RetryableError('once', { delayMs: 0 });
        await effect(message, context);
      },
      hooks: {
        onOutcome: ({ message }) => void durable.add(Number(message.source.brokerMessageId)),
      },
    });
    const connect = async (): Promise<AmqpConnection> => {
      const connection = await amqp.connect(amqpUrl());
      const create = connection.createConfirmChannel.bind(connection);
      (connection as unknown as { createConfirmChannel: unknown }).createConfirmChannel = async () => {
        const channel = await create();
        const consume = channel.consume.bind(channel);
        (channel as unknown as { consume: unknown }).consume = (
          queue: string,
          onMessage: (m: amqp.ConsumeMessage | null) => void,
          options?: amqp.Options.Consume,
        ) =>
          consume(
            queue,
            (m) => {
              if (m) unsettled.add(m.fields.deliveryTag);
              onMessage(m);
            },
            options,
          );
        const ack = channel.ack.bind(channel);
        (channel as unknown as { ack: unknown }).ack = (m: amqp.Message, allUpTo?: boolean) => {
          const tag = m.fields.deliveryTag;
          const covered = allUpTo ? [...unsettled].filter((t) => t <= tag) : [tag];
          if (allUpTo && covered.length > 1) multipleAcks++;
          for (const t of covered) {
            if (!durable.has(t))
              violations.push(`tag ${t} acked (by ${tag}${allUpTo ? '+' : ''}) before durable`);
            unsettled.delete(t);
          }
          ack(m, allUpTo);
        };
        const nack = channel.nack.bind(channel);
        (channel as unknown as { nack: unknown }).nack = (
          m: amqp.Message,
          allUpTo?: boolean,
          requeue?: boolean,
        ) => {
          unsettled.delete(m.fields.deliveryTag);
          nack(m, allUpTo, requeue);
        };
        return channel;
      };
      return connection;
    };
    const ids = Array.from({ length: 400 }, (_, n) => `c-${n}`);
    await h.publish(ids.map((id) => ({ id, body: '{}' })));
    const transport = rabbitmqConsumer({
      connect,
      queue: h.queue,
      handler: consumer,
      concurrency: 8,
      prefetch: 16,
      topology: TEST_TOPOLOGY,
    });
    await transport.start();
    await expect.poll(async () => (await pg.effectCounts()).size, { timeout: 60_000 }).toBe(ids.length);
    await transport.stop();
    expect(violations).toEqual([]);
    const counts = await pg.effectCounts();
    expect([...counts].filter(([, n]) => n !== 1)).toEqual([]);
    expect(await h.messageCount(h.queue)).toBe(0);
    // Out-of-order completions do produce multiple acks (else this test would prove nothing about them).
    expect(multipleAcks).toBeGreaterThan(0);
  });
});
