// Issue 22, item 8: what a copy carries into a size-limited AMQP property must fit it, or every copy of that
// message is refused and the original is requeued forever. AMQP short strings (messageId, contentType, …) hold
// at most 255 bytes; amqplib refuses a longer one before it reaches the broker. An id too long for `messageId`
// travels in the `message-id` header instead, on the dead letter, the delay-queue copy and the publisher's
// messages alike. Against the real broker.

import { HEADERS, idempotentConsumer, PermanentError, RetryableError } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { rabbitmqPublisher } from '../src/index.js';
import { toRawPublish } from '../src/rabbitmq-publisher.js';
import { useSharedBroker } from './broker-lock.js';
import { rabbitmqHarness } from './rabbitmq-harness.js';
import type { RabbitmqHarness } from './rabbitmq-harness.js';

useSharedBroker();

const harnesses: RabbitmqHarness[] = [];
async function harness(): Promise<RabbitmqHarness> {
  const h = await rabbitmqHarness();
  harnesses.push(h);
  return h;
}

afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.dispose()));
});

const wait = { timeoutMs: 30_000 };

/** An id of `bytes` bytes of UTF-8 (2-byte characters when `wide`). */
function longId(bytes: number, wide = false): string {
  const prefix = uniqueName('id');
  return wide
    ? `${prefix}-${'é'.repeat(Math.ceil((bytes - prefix.length - 1) / 2))}`
    : `${prefix}-${'x'.repeat(bytes - prefix.length - 1)}`;
}

describe('AMQP short-string limits on the copies a consumer publishes', () => {
  it('dead-letters an id over 255 bytes that is invalid (over maxMessageIdLength): the DLQ copy carries it whole in headers', async () => {
    const h = await harness();
    const recorder = new OutcomeRecorder();
    const consumer = idempotentConsumer({
      name: uniqueName('rmq-long-invalid'),
      store: new InMemoryInboxStore(),
      handler: async () => undefined,
      maxMessageIdLength: 100,
      hooks: { onOutcome: recorder.hook },
    });
    await h.start(consumer);
    const id = longId(300);
    await h.publishRaw([{ body: '{}', options: { headers: { 'message-id': id } } }]);
    const [letter] = await h.readDeadLetters(1, 30_000);
    expect(letter?.headers[HEADERS.reason]).toBe('invalid-id');
    expect(letter?.headers[HEADERS.originalId]).toBe(id);
    expect(letter?.headers[HEADERS.messageId]).toBe(id);
    expect(letter?.id).toBe(id);
    expect(await h.messageCount(h.queue)).toBe(0);
  });

  it.each([
    ['300 ASCII bytes', longId(300)],
    ['400 bytes of two-byte characters', longId(400, true)],
  ])(
    'retries through the delay queue and dead-letters a valid id of %s, with the same id on every copy',
    async (_, id) => {
      const h = await harness();
      const recorder = new OutcomeRecorder();
      const seen: string[] = [];
      const consumer = idempotentConsumer({
        name: uniqueName('rmq-long-valid'),
        store: new InMemoryInboxStore(),
        backoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 'none' },
        handler: async (message, context) => {
          seen.push(message.id);
          if (context.attempt === 1) throw new RetryableError('once more', { delayMs: 100 });
          throw new PermanentError('no');
        },
        hooks: { onOutcome: recorder.hook },
      });
      await h.start(consumer);
      await h.publishRaw([{ body: '{}', options: { headers: { 'message-id': id } } }]);
      await recorder.waitFor(id, 'dead-letter', wait);
      expect(seen).toEqual([id, id]);
      const [letter] = await h.readDeadLetters(1, 30_000);
      expect(letter?.id).toBe(id);
      expect(letter?.headers[HEADERS.reason]).toBe('permanent-error');
      expect(letter?.headers[HEADERS.messageId]).toBe(id);
      expect(await h.messageCount(h.queue)).toBe(0);
    },
  );

  it('keeps an id of exactly 255 bytes in the messageId property', () => {
    const id = longId(255);
    const raw = toRawPublish({ destination: '', routingKey: 'q', id, body: '{}' });
    expect(raw.options.messageId).toBe(id);
    const over = longId(256);
    const rawOver = toRawPublish({ destination: '', routingKey: 'q', id: over, body: '{}' });
    expect(rawOver.options.messageId).toBeUndefined();
    expect(rawOver.options.headers?.[HEADERS.messageId]).toBe(over);
  });

  it('publishes (outbox relay, DLQ replay) an id over 255 bytes and a content type over 255 bytes; the consumer reads the same id', async () => {
    const h = await harness();
    const recorder = new OutcomeRecorder();
    const consumer = idempotentConsumer({
      name: uniqueName('rmq-long-publish'),
      store: new InMemoryInboxStore(),
      handler: async () => undefined,
      hooks: { onOutcome: recorder.hook },
    });
    await h.start(consumer);
    const channel = await h.admin.createConfirmChannel();
    channel.on('error', () => undefined);
    const id = longId(500, true);
    await rabbitmqPublisher({ channel }).publish([
      {
        destination: '',
        routingKey: h.queue,
        id,
        body: '{}',
        headers: { 'content-type': `application/json; ${'p=1; '.repeat(60)}` },
      },
    ]);
    await recorder.waitFor(id, 'processed', wait);
    await channel.close();
  });
});
