// rabbitmqPublisher against the real broker: confirmed, persistent, id as property and header; unroutable
// and closed-channel publishes reject instead of vanishing.

import { ConfigurationError, PublishError } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rabbitmqPublisher } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';

useSharedBroker();

let connection: amqp.ChannelModel;
let queue: string;

beforeAll(async () => {
  connection = await amqp.connect(amqpUrl());
  queue = uniqueName('pub');
  const ch = await connection.createChannel();
  await ch.assertQueue(queue, { durable: true });
  await ch.close();
});

afterAll(async () => {
  const ch = await connection.createChannel();
  await ch.deleteQueue(queue);
  await connection.close();
});

describe('rabbitmqPublisher', () => {
  it('publishes persistent messages with the id as messageId property and message-id header, once confirmed', async () => {
    const channel = await connection.createConfirmChannel();
    const publisher = rabbitmqPublisher({ channel });
    const stamp = new Date('2025-01-02T03:04:05Z');
    await publisher.publish([
      {
        destination: '',
        routingKey: queue,
        id: 'm-1',
        body: '{"a":1}',
        headers: { 'x-k': 'v' },
        timestamp: stamp,
      },
      { destination: '', routingKey: queue, id: 'm-2', body: new Uint8Array([123, 125]) },
    ]);
    const first = await channel.get(queue, { noAck: true });
    const second = await channel.get(queue, { noAck: true });
    expect(first && first.properties).toMatchObject({
      messageId: 'm-1',
      deliveryMode: 2,
      timestamp: stamp.getTime() / 1000,
      headers: { 'message-id': 'm-1', 'x-k': 'v' },
    });
    expect(first && first.content.toString()).toBe('{"a":1}');
    expect(second && second.content.toString()).toBe('{}');
    await publisher.close();
    await channel.close();
  });

  it('rejects with a PublishError when no queue is bound (RabbitMQ would ack and drop it)', async () => {
    const channel = await connection.createConfirmChannel();
    const publisher = rabbitmqPublisher({ channel });
    await expect(
      publisher.publish([{ destination: '', routingKey: uniqueName('nowhere'), id: 'lost', body: '{}' }]),
    ).rejects.toThrow(PublishError);
    // The channel stays usable, and a routable message is still confirmed.
    await publisher.publish([{ destination: '', routingKey: queue, id: 'kept', body: '{}' }]);
    expect((await channel.get(queue, { noAck: true })) && 'got').toBe('got');
    await channel.close();
  });

  it('rejects with a PublishError on a closed channel, and refuses delayMs', async () => {
    const channel = await connection.createConfirmChannel();
    const publisher = rabbitmqPublisher({ channel });
    await expect(
      publisher.publish([{ destination: '', routingKey: queue, id: 'later', body: '{}', delayMs: 1_000 }]),
    ).rejects.toThrow(ConfigurationError);
    await channel.close();
    await expect(
      publisher.publish([{ destination: '', routingKey: queue, id: 'x', body: '{}' }]),
    ).rejects.toThrow(PublishError);
  });
});
