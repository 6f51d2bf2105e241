// Smoke: a real RabbitMQ broker: publish on a confirm channel, consume with a manual ack, quorum queues work.
import amqp from 'amqplib';
import { afterAll, describe, expect, it } from 'vitest';
import { requireService, uniqueTestName } from '../support/services.js';

describe('rabbitmq smoke', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('publishes with a confirm and consumes with a manual ack', async () => {
    const { url } = requireService('rabbitmq');
    const connection = await amqp.connect(url);
    cleanups.push(() => connection.close());
    const channel = await connection.createConfirmChannel();
    const queue = uniqueTestName('smoke-queue');
    await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    cleanups.push(async () => {
      await channel.deleteQueue(queue);
    });

    // The broker confirms the publish: the callback runs with no error.
    await new Promise<void>((resolve, reject) => {
      channel.sendToQueue(
        queue,
        Buffer.from('hello'),
        { persistent: true, messageId: 'm-1', headers: { 'x-test': 'smoke' } },
        (error: unknown) => (error ? reject(error) : resolve()),
      );
    });
    await channel.waitForConfirms();

    const message = await new Promise<amqp.ConsumeMessage>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no message within 15 s')), 15_000);
      channel
        .consume(
          queue,
          (msg) => {
            if (!msg) return;
            clearTimeout(timer);
            resolve(msg);
          },
          { noAck: false },
        )
        .catch(reject);
    });
    expect(message.content.toString()).toBe('hello');
    expect(message.properties.messageId).toBe('m-1');
    expect(message.properties.headers?.['x-test']).toBe('smoke');
    expect(message.fields.redelivered).toBe(false);
    channel.ack(message);

    // Acked: the queue is empty (nothing ready, nothing unacked once the consumer is cancelled).
    await channel.cancel(message.fields.consumerTag);
    const deadline = Date.now() + 5_000;
    let count = -1;
    while (Date.now() < deadline) {
      count = (await channel.checkQueue(queue)).messageCount;
      if (count === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(count).toBe(0);
  });
});
