// Behaviour of rabbitmqConsumer beyond the conformance suite, against the real broker: how the message id
// is found, oversize bodies, the delay path's headers and counts, delay-0 requeues, dead channels whose acks
// must be dropped, and configuration errors.

import { ConfigurationError, HEADERS, idempotentConsumer, RetryableError } from '@inboxkit/core';
import type { DecodedMessage, HandlerContext, Logger } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import { rabbitmqConsumer, topologyNames } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';
import { rabbitmqHarness } from './rabbitmq-harness.js';
import type { RabbitmqHarness } from './rabbitmq-harness.js';
import { useSharedBroker } from './broker-lock.js';

useSharedBroker();

type Handler = (message: DecodedMessage<unknown>, context: HandlerContext<unknown>) => Promise<void>;

function testConsumer(handler: Handler = async () => undefined, maxAttempts = 5) {
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, unknown>({
    name: uniqueName('rmq-consumer'),
    store: new InMemoryInboxStore(),
    handler,
    maxAttempts,
    backoff: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 400, jitter: 'none' },
    hooks: { onOutcome: recorder.hook },
  });
  return { consumer, recorder };
}

/** A logger that keeps what it was told, to count reconnects and spot channel errors. */
function memoryLogger(): Logger & { readonly lines: { level: string; msg: string; obj: object }[] } {
  const lines: { level: string; msg: string; obj: object }[] = [];
  const at = (level: string) => (obj: object, msg?: string) =>
    void lines.push({ level, msg: msg ?? '', obj });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

const harnesses: RabbitmqHarness[] = [];
async function harness(): Promise<RabbitmqHarness> {
  const h = await rabbitmqHarness();
  harnesses.push(h);
  return h;
}

afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.dispose()));
});

const wait = { timeoutMs: 20_000 };

describe('rabbitmqConsumer', () => {
  it('finds the id in the messageId property, then message-id, then ce-id, then the messageId option', async () => {
    const h = await harness();
    const { consumer, recorder } = testConsumer();
    await h.start(consumer, {
      messageId: (m) => m.properties.headers?.['x-order-ref'] as string | undefined,
    });
    const [a, b, c, d] = [uniqueName('prop'), uniqueName('hdr'), uniqueName('ce'), uniqueName('fn')];
    await h.publishRaw([
      { body: '{}', options: { messageId: a, headers: { 'message-id': 'ignored', 'ce-id': 'ignored' } } },
      { body: '{}', options: { headers: { 'Message-Id': b, 'ce-id': 'ignored' } } },
      { body: '{}', options: { headers: { 'ce-id': c, 'x-order-ref': 'ignored' } } },
      { body: '{}', options: { headers: { 'x-order-ref': d } } },
    ]);
    for (const id of [a, b, c, d]) await recorder.waitFor(id, 'processed', wait);
    expect(recorder.counts()).toMatchObject({ processed: 4, 'dead-letter': 0 });
  });

  it('dead-letters a message without any id as missing-id, unless the content fallback is on', async () => {
    const h = await harness();
    const plain = testConsumer();
    const running = await h.start(plain.consumer);
    await h.publishRaw([{ body: '{"n":1}' }]);
    const [letter] = await h.readDeadLetters(1, 20_000);
    expect(letter?.headers[HEADERS.reason]).toBe('missing-id');
    expect(letter?.headers[HEADERS.consumer]).toBe(plain.consumer.name);
    await running.stop();

    const fallback = testConsumer();
    await h.start(fallback.consumer, { contentIdFallback: true });
    await h.publishRaw([{ body: '{"n":2}' }, { body: '{"n":2}' }]);
    const events = await fallback.recorder.waitForCount(2, wait);
    expect(events.map((e) => e.outcome.status).sort()).toEqual(['duplicate', 'processed']);
    expect(events[0]!.id).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('dead-letters an oversize body with reason oversize, without running the handler', async () => {
    const h = await harness();
    let ran = 0;
    const { consumer, recorder } = testConsumer(async () => void ran++);
    await h.start(consumer, { maxMessageBytes: 64 });
    const [big, small] = [uniqueName('big'), uniqueName('small')];
    const bigBody = JSON.stringify({ pad: 'x'.repeat(100) });
    await h.publishRaw([
      { body: bigBody, options: { messageId: big, headers: { 'x-tenant': 't1' } } },
      { body: '{}', options: { messageId: small } },
    ]);
    await recorder.waitFor(small, 'processed', wait);
    const [letter] = await h.readDeadLetters(1, 20_000);
    expect(letter?.id).toBe(big);
    expect(letter?.headers[HEADERS.reason]).toBe('oversize');
    expect(letter?.headers[HEADERS.errorMessage]).toContain('exceeds maxMessageBytes (64)');
    expect(letter?.headers['x-tenant']).toBe('t1');
    expect(Buffer.from(letter!.body as Uint8Array).toString()).toBe(bigBody);
    expect(ran).toBe(1);
    expect(await h.messageCount(h.queue)).toBe(0);
  });

  it('retries through a delay queue: the copy carries the attempt count and the original route, and waits', async () => {
    const h = await harness();
    const seen: { attempt: number; at: number; headers: Readonly<Record<string, string>> }[] = [];
    const { consumer, recorder } = testConsumer(async (message, context) => {
      seen.push({ attempt: context.attempt, at: Date.now(), headers: message.headers });
      if (context.attempt === 1) throw new RetryableError('busy', { delayMs: 300 });
    });
    await h.start(consumer);
    const id = uniqueName('delayed');
    const ch = await h.admin.createConfirmChannel();
    await ch.bindQueue(h.queue, 'amq.direct', `route-${h.queue}`);
    ch.publish('amq.direct', `route-${h.queue}`, Buffer.from('{}'), {
      messageId: id,
      headers: { 'x-tenant': 't1' },
    });
    await ch.waitForConfirms();
    await ch.close();
    await recorder.waitFor(id, 'processed', wait);
    const deliveries = recorder.events.filter((e) => e.id === id);
    expect(deliveries.map((e) => e.message.deliveryCount)).toEqual([1, 2]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(300);
    expect(seen[1]!.headers[HEADERS.attempt]).toBe('1');
    expect(seen[1]!.headers['x-tenant']).toBe('t1');
    // The copy came through the default exchange from the delay queue; the original route is kept.
    const route = { exchange: 'amq.direct', routingKey: `route-${h.queue}`, destination: h.queue };
    expect(deliveries[0]!.message.source).toMatchObject(route);
    expect(deliveries[1]!.message.source).toMatchObject(route);
    const names = topologyNames(h.queue);
    expect(await h.messageCount(h.queue)).toBe(0);
    expect(await h.messageCount(names.delayQueue(500))).toBe(0);
  });

  it('requeues a retry with no delay (nack) and counts the attempt in the inbox', async () => {
    const h = await harness();
    const { consumer, recorder } = testConsumer(async (_m, context) => {
      if (context.attempt === 1) throw new RetryableError('again now', { delayMs: 0 });
    });
    await h.start(consumer);
    const id = uniqueName('requeue');
    await h.publish([{ id, body: '{}' }]);
    await recorder.waitFor(id, 'processed', wait);
    expect(recorder.outcomes(id).map((o) => o.status)).toEqual(['retry', 'processed']);
    expect(recorder.outcomes(id).map((o) => ('attempt' in o ? o.attempt : undefined))).toEqual([1, 2]);
  });

  it('drops the acks of a channel that died mid-handler, reconnects, and absorbs the redelivery', async () => {
    const h = await harness();
    const logger = memoryLogger();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inHandler = new Promise<void>((resolve) => (entered = resolve));
    let effects = 0;
    const { consumer, recorder } = testConsumer(async () => {
      entered();
      await released;
      effects++;
    });
    await h.start(consumer, { logger });
    const id = uniqueName('orphan');
    await h.publish([{ id, body: '{}' }]);
    await inHandler;
    await h.dropConnections(); // The broker takes the delivery back; the handler is still running.
    release();
    await recorder.waitFor(id, 'duplicate', wait);
    expect(recorder.outcomes(id).map((o) => o.status)).toEqual(['processed', 'duplicate']);
    expect(effects).toBe(1);
    await expect.poll(() => h.messageCount(h.queue)).toBe(0);
    // An old delivery tag acked on the new channel would make the broker close it (406 unknown tag): one
    // reconnect only, no channel errors.
    expect(logger.lines.filter((l) => l.msg === 'rabbitmq consumer reconnected')).toHaveLength(1);
    expect(logger.lines.filter((l) => l.msg === 'rabbitmq channel error')).toEqual([]);
  });

  it('on an application-owned connection: resubscribes after the broker cancels it, and leaves the connection open', async () => {
    const h = await harness();
    const logger = memoryLogger();
    const connection = await amqp.connect(amqpUrl());
    const { consumer, recorder } = testConsumer();
    const transport = rabbitmqConsumer({
      connection,
      queue: h.queue,
      handler: consumer,
      topology: h.topology,
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
      logger,
    });
    await transport.start();
    const first = uniqueName('before');
    await h.publish([{ id: first, body: '{}' }]);
    await recorder.waitFor(first, 'processed', wait);
    // Deleting the queue cancels the consumer (basic.cancel); the consumer declares it again and resumes.
    const ch = await h.admin.createChannel();
    await ch.deleteQueue(h.queue);
    await ch.close();
    await expect
      .poll(() => logger.lines.some((l) => l.msg === 'rabbitmq consumer reconnected'), { timeout: 20_000 })
      .toBe(true);
    const second = uniqueName('after');
    await h.publish([{ id: second, body: '{}' }]);
    await recorder.waitFor(second, 'processed', wait);
    await transport.stop();
    await transport.stop();
    const still = await connection.createChannel();
    await still.close();
    await connection.close();
  });

  it('rejects bad options with a ConfigurationError that says what to change', () => {
    const { consumer } = testConsumer();
    const connect = async () => {
      throw new Error('unused');
    };
    expect(() => rabbitmqConsumer({ queue: 'q', handler: consumer })).toThrow(/exactly one of `connect`/);
    expect(() =>
      rabbitmqConsumer({ connect, queue: 'q', handler: consumer, concurrency: 4, prefetch: 2 }),
    ).toThrow(ConfigurationError);
    expect(() =>
      rabbitmqConsumer({ connect, queue: 'q', handler: consumer, topology: { deliveryLimit: 3 } }),
    ).toThrow(/deliveryLimit.*above maxAttempts/);
    expect(() => rabbitmqConsumer({ connect, queue: '', handler: consumer })).toThrow(ConfigurationError);
  });

  it('fails start() with a ConfigurationError when the queue exists with other arguments', async () => {
    const h = await harness();
    const ch = await h.admin.createChannel();
    const queue = uniqueName('classic');
    await ch.assertQueue(queue, { durable: true });
    const { consumer } = testConsumer();
    const transport = rabbitmqConsumer({ connect: () => amqp.connect(amqpUrl()), queue, handler: consumer });
    const error: unknown = await transport.start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/PRECONDITION_FAILED.*topology options match/);
    const cleanup = await h.admin.createChannel();
    for (const name of [queue, `${queue}.dlq`]) await cleanup.deleteQueue(name);
    await cleanup.deleteExchange(`${queue}.dlx`);
    await cleanup.close();
  });
});
