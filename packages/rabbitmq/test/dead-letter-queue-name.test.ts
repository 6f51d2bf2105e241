// Issue 22, item 9: the DLQ's name is configurable (`topology.deadLetterQueue`; default `<queue>.dlq`), so
// several work queues can share one DLQ, or an operator's naming scheme can be kept. Dead letters of the
// consumer and of the broker's delivery limit both land there. Against the real broker.

import { ConfigurationError, HEADERS, idempotentConsumer, PermanentError } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareTopology, rabbitmqConsumer, rabbitmqDeadLetterQueue, topologyNames } from '../src/index.js';
import type { DeclaredTopology } from '../src/index.js';
import { resolveTopology } from '../src/declare-topology.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';

useSharedBroker();

let connection: amqp.ChannelModel;
const declared: DeclaredTopology[] = [];

beforeAll(async () => {
  connection = await amqp.connect(amqpUrl());
});

afterAll(async () => {
  const ch = await connection.createChannel();
  for (const t of declared) {
    for (const q of [t.queue, t.deadLetterQueue, ...t.delayBucketsMs.map((b) => t.delayQueue(b))])
      await ch.deleteQueue(q);
    await ch.deleteExchange(t.deadLetterExchange);
  }
  await connection.close();
});

describe('a configurable DLQ name', () => {
  it('keeps <queue>.dlq by default and names every queue of the topology after the option', () => {
    expect(topologyNames('orders').deadLetterQueue).toBe('orders.dlq');
    expect(resolveTopology({ queue: 'orders' }).deadLetterQueue).toBe('orders.dlq');
    expect(resolveTopology({ queue: 'orders', deadLetterQueue: 'poison' }).deadLetterQueue).toBe('poison');
    expect(topologyNames('orders', { deadLetterQueue: 'poison' })).toMatchObject({
      deadLetterQueue: 'poison',
      deadLetterExchange: 'orders.dlx',
      deadLetterRoutingKey: 'orders',
    });
  });

  it.each([
    ['empty', ''],
    ['the work queue itself', 'orders'],
    ['one of its delay queues', 'orders.retry.1000'],
    ['over 255 bytes', 'd'.repeat(256)],
    ['reserved by the broker', 'amq.dlq'],
  ])('refuses a DLQ name that is %s, saying what to change', (_, name) => {
    expect(() =>
      resolveTopology({ queue: 'orders', delayBucketsMs: [1_000], deadLetterQueue: name }),
    ).toThrow(ConfigurationError);
    expect(() =>
      resolveTopology({ queue: 'orders', delayBucketsMs: [1_000], deadLetterQueue: name }),
    ).toThrow(/deadLetterQueue/);
  });

  it('dead-letters two work queues into one shared DLQ that the reader lists', async () => {
    const shared = uniqueName('shared.dlq');
    const queues = [uniqueName('dlq-name-a'), uniqueName('dlq-name-b')];
    const recorder = new OutcomeRecorder();
    const consumers = [];
    for (const queue of queues) {
      const topology = { deadLetterQueue: shared, delayBucketsMs: [250], queueType: 'classic' as const };
      const ch = await connection.createChannel();
      declared.push(await declareTopology(ch, { ...topology, queue }));
      await ch.close();
      const consumer = rabbitmqConsumer({
        connect: () => amqp.connect(amqpUrl()),
        queue,
        topology,
        handler: idempotentConsumer({
          name: uniqueName('dlq-name'),
          store: new InMemoryInboxStore(),
          handler: async () => {
            throw new PermanentError('no');
          },
          hooks: { onOutcome: recorder.hook },
        }),
      });
      await consumer.start();
      consumers.push(consumer);
    }
    const ch = await connection.createConfirmChannel();
    for (const queue of queues) ch.sendToQueue(queue, Buffer.from('{}'), { messageId: `${queue}-m` });
    await ch.waitForConfirms();
    await ch.close();
    for (const queue of queues) await recorder.waitFor(`${queue}-m`, 'dead-letter', { timeoutMs: 30_000 });
    await Promise.all(consumers.map((c) => c.stop()));

    const check = await connection.createChannel();
    expect((await check.checkQueue(shared)).messageCount).toBe(2);
    // No `<queue>.dlq` was declared beside it.
    check.on('error', () => undefined);
    await expect(check.checkQueue(`${queues[0]}.dlq`)).rejects.toThrow(/NOT_FOUND/);

    const reader = rabbitmqDeadLetterQueue({ connection, queue: queues[0]!, deadLetterQueue: shared });
    const ids: (string | undefined)[] = [];
    try {
      for await (const entry of reader.browse({ limit: 10 })) ids.push(entry.headers[HEADERS.originalId]);
    } finally {
      await reader.close();
    }
    expect(ids.sort()).toEqual(queues.map((q) => `${q}-m`).sort());
  });
});
