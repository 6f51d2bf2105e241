// declareTopology against the real broker: idempotent, delay queues that hand messages back to the work
// queue after their TTL, the DLQ behind the DLX, and validation that says what to change.

import { ConfigurationError } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareTopology, DEFAULT_DELIVERY_LIMIT, topologyNames } from '../src/index.js';
import type { DeclaredTopology } from '../src/index.js';
import { resolveTopology, delayBucketFor } from '../src/declare-topology.js';
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

async function get(ch: amqp.Channel, queue: string, timeoutMs = 5_000): Promise<amqp.GetMessage> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await ch.get(queue, { noAck: true });
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`nothing arrived in ${queue} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('declareTopology', () => {
  it('declares a quorum work queue, delay queues that return to it, and a DLQ behind the DLX; twice is fine', async () => {
    const ch = await connection.createConfirmChannel();
    const queue = uniqueName('topo');
    const t = await declareTopology(ch, { queue, delayBucketsMs: [200, 1_000] });
    declared.push(t);
    const again = await declareTopology(ch, { queue, delayBucketsMs: [1_000, 200] });
    expect(JSON.stringify(again)).toBe(JSON.stringify(t));
    expect(t).toMatchObject({
      queueType: 'quorum',
      deliveryLimit: DEFAULT_DELIVERY_LIMIT,
      delayBucketsMs: [200, 1_000],
    });
    expect(topologyNames(queue)).toMatchObject({
      deadLetterExchange: `${queue}.dlx`,
      deadLetterQueue: `${queue}.dlq`,
      deadLetterRoutingKey: queue,
    });

    const sent = Date.now();
    ch.sendToQueue(t.delayQueue(200), Buffer.from('later'), { messageId: 'd', persistent: true });
    ch.publish(t.deadLetterExchange, t.deadLetterRoutingKey, Buffer.from('dead'), {
      messageId: 'x',
      persistent: true,
    });
    await ch.waitForConfirms();
    const back = await get(ch, queue);
    expect(back.content.toString()).toBe('later');
    expect(Date.now() - sent).toBeGreaterThanOrEqual(190);
    expect((await get(ch, t.deadLetterQueue)).content.toString()).toBe('dead');
    await ch.close();
  });

  it('declares classic queues without a delivery limit', async () => {
    const ch = await connection.createChannel();
    const t = await declareTopology(ch, {
      queue: uniqueName('classic'),
      queueType: 'classic',
      delayBucketsMs: [500],
    });
    declared.push(t);
    expect(t).toMatchObject({ queueType: 'classic', deliveryLimit: undefined });
    await ch.close();
  });

  it('validates before touching the broker', () => {
    expect(() => resolveTopology({ queue: 'q', maxAttempts: 5, deliveryLimit: 5 })).toThrow(
      /deliveryLimit.*above maxAttempts/,
    );
    expect(resolveTopology({ queue: 'q', maxAttempts: 30 }).deliveryLimit).toBe(35);
    expect(() => resolveTopology({ queue: 'q', queueType: 'classic', deliveryLimit: 9 })).toThrow(
      ConfigurationError,
    );
    expect(() => resolveTopology({ queue: 'q', delayBucketsMs: [] })).toThrow(/delayBucketsMs/);
    expect(() => resolveTopology({ queue: '' })).toThrow(/queue/);
  });

  it('picks the smallest delay bucket that is long enough, else the largest', () => {
    const buckets = [250, 1_000, 5_000];
    expect([1, 250, 251, 4_999, 60_000].map((d) => delayBucketFor(buckets, d))).toEqual([
      250, 250, 1_000, 5_000, 5_000,
    ]);
  });
});
