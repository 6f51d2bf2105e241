// rabbitmqDeadLetterQueue against the real broker: browse leaves the DLQ as it was, take removes or
// releases one at a time, and dead letters the broker made itself (delivery limit) read like ours.

import { HEADERS, parseDeadLetterHeaders } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareTopology, rabbitmqDeadLetterQueue } from '../src/index.js';
import type { DeclaredTopology } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';

useSharedBroker();

let connection: amqp.ChannelModel;
let channel: amqp.ConfirmChannel;
let topology: DeclaredTopology;

async function depth(queue: string): Promise<number> {
  const ch = await connection.createChannel();
  const { messageCount } = await ch.checkQueue(queue);
  await ch.close();
  return messageCount;
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

beforeAll(async () => {
  connection = await amqp.connect(amqpUrl());
  channel = await connection.createConfirmChannel();
  topology = await declareTopology(channel, {
    queue: uniqueName('dlq'),
    maxAttempts: 1,
    deliveryLimit: 2,
    delayBucketsMs: [1_000],
  });
});

afterAll(async () => {
  for (const q of [topology.queue, topology.deadLetterQueue, topology.delayQueue(1_000)])
    await channel.deleteQueue(q);
  await channel.deleteExchange(topology.deadLetterExchange);
  await connection.close();
});

describe('rabbitmqDeadLetterQueue', () => {
  it('browses without removing, then takes: remove() acks one, release() leaves it', async () => {
    for (const id of ['d-1', 'd-2', 'd-3']) {
      channel.publish(
        topology.deadLetterExchange,
        topology.deadLetterRoutingKey,
        Buffer.from(`{"id":"${id}"}`),
        {
          messageId: id,
          persistent: true,
          headers: {
            [HEADERS.consumer]: 'orders',
            [HEADERS.reason]: 'max-attempts',
            [HEADERS.originalId]: id,
          },
        },
      );
    }
    await channel.waitForConfirms();
    const dlq = rabbitmqDeadLetterQueue({ connection, queue: topology.queue });
    expect(dlq.nonDestructiveBrowse).toBe(false);

    const browsed = await collect(dlq.browse({ limit: 2 }));
    expect(browsed.map((e) => e.id)).toEqual(['d-1', 'd-2']);
    expect(parseDeadLetterHeaders(browsed[0]!.headers)).toMatchObject({
      consumer: 'orders',
      reason: 'max-attempts',
    });
    await expect.poll(() => depth(topology.deadLetterQueue)).toBe(3);

    const seen: string[] = [];
    for await (const taken of dlq.take({ limit: 10 })) {
      seen.push(taken.id!);
      if (taken.id === 'd-2') await taken.release();
      else await taken.remove();
    }
    expect(seen.sort()).toEqual(['d-1', 'd-2', 'd-3']);
    await expect.poll(() => depth(topology.deadLetterQueue)).toBe(1);
    const left: (string | undefined)[] = [];
    for await (const taken of dlq.take({ limit: 5 })) {
      left.push(taken.id);
      await taken.remove();
    }
    expect(left).toEqual(['d-2']);
    await dlq.close();
  });

  it('reads a dead letter the broker made at the delivery limit with reason delivery-limit', async () => {
    channel.sendToQueue(topology.queue, Buffer.from('{}'), { messageId: 'crash-loop', persistent: true });
    await channel.waitForConfirms();
    // Three returns exceed the limit of 2, as three crashed processes would.
    for (let i = 0; i < 3; i++) {
      const ch = await connection.createChannel();
      while ((await ch.get(topology.queue, { noAck: false })) === false)
        await new Promise((r) => setTimeout(r, 20));
      await ch.close();
    }
    const dlq = rabbitmqDeadLetterQueue({ connection, queue: topology.queue, consumer: 'orders' });
    await expect.poll(() => depth(topology.deadLetterQueue)).toBe(1);
    const [entry] = await collect(dlq.browse({ limit: 1 }));
    expect(entry?.id).toBe('crash-loop');
    expect(parseDeadLetterHeaders(entry!.headers)).toMatchObject({
      consumer: 'orders',
      reason: 'delivery-limit',
      source: { transport: 'rabbitmq', destination: topology.queue },
    });
    await dlq.close();
  });

  it('says which DLQ is missing', async () => {
    const dlq = rabbitmqDeadLetterQueue({ connection, queue: uniqueName('absent') });
    await expect(collect(dlq.browse({ limit: 1 }))).rejects.toThrow(/DLQ ".*\.dlq" does not exist/);
  });
});
