// rabbitmqDeadLetterQueueDepth against the real broker: the DLQ gauge's broker depth is the queue's ready
// messages; a queue that does not exist rejects, and the next read works on a new channel.

import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { rabbitmqDeadLetterQueueDepth } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';

useSharedBroker();

describe('rabbitmqDeadLetterQueueDepth', () => {
  let connection: amqp.ChannelModel;
  const queue = uniqueName('dlq-depth');
  beforeAll(async () => {
    connection = await amqp.connect(amqpUrl());
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: true });
    for (const id of ['a', 'b', 'c']) channel.sendToQueue(queue, Buffer.from(id), { persistent: true });
    await channel.waitForConfirms();
    await channel.close();
  });
  afterAll(async () => {
    const channel = await connection.createChannel();
    await channel.deleteQueue(queue).catch(() => undefined);
    await connection.close();
  });

  it('reads the ready messages of the DLQ, and recovers from a read of a queue that is gone', async () => {
    const gauge = rabbitmqDeadLetterQueueDepth({ connection, queue });
    expect(gauge.name).toBe(queue);
    expect(await gauge.depth()).toBe(3);
    const missing = rabbitmqDeadLetterQueueDepth({ connection, queue: `${queue}-missing` });
    await expect(missing.depth()).rejects.toThrow(/NOT_FOUND|404/);
    expect(await gauge.depth()).toBe(3);
    const channel = await connection.createChannel();
    await channel.assertQueue(`${queue}-missing`, { durable: false, autoDelete: false });
    expect(await missing.depth()).toBe(0);
    await channel.deleteQueue(`${queue}-missing`);
    await channel.close();
  });
});
