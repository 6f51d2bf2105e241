// Issue 22, item 8: a dead letter must fit what SQS accepts, or the send is refused on every attempt and the
// message never reaches inboxkit's DLQ. SQS refuses control characters other than tab/LF/CR, lone surrogates
// and U+FFFE/U+FFFF in any attribute value (ElasticMQ too, checked here), and counts the body plus every
// attribute's name, type and value against one size limit (256 KiB by default; ElasticMQ does not enforce it,
// so the size the dead letter arrives with is measured here from what the DLQ hands back).

import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { Message } from '@aws-sdk/client-sqs';
import {
  HEADERS,
  idempotentConsumer,
  MINIMAL_ID_LENGTH,
  parseDeadLetterHeaders,
  PermanentError,
} from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { afterEach, describe, expect, it } from 'vitest';
import {
  deadLetterMessage,
  DEFAULT_MAX_SQS_MESSAGE_BYTES,
  sqsMessageBytes,
} from '../src/dead-letter-message.js';
import { decodeMessageAttributes, expandDeadLetterHeaders, sqsText } from '../src/message-attributes.js';
import { sqsHarness } from './sqs-harness.js';
import type { SqsHarness } from './sqs-harness.js';

const harnesses: SqsHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.dispose()));
});

/** Receives the one message of the DLQ with every attribute, as SQS stores it. */
async function receiveDeadLetter(h: SqsHarness): Promise<Message> {
  for (let i = 0; i < 60; i++) {
    const result = await h.client.send(
      new ReceiveMessageCommand({
        QueueUrl: h.queues.deadLetterQueueUrl,
        MaxNumberOfMessages: 1,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
      }),
    );
    const [message] = result.Messages ?? [];
    if (message !== undefined) return message;
  }
  throw new Error('no dead letter arrived');
}

/** The size SQS counts for a received message. */
function receivedBytes(message: Message): number {
  return sqsMessageBytes({
    QueueUrl: '',
    MessageBody: message.Body,
    MessageAttributes: message.MessageAttributes,
  });
}

describe('SQS limits on the dead letter', () => {
  it('dead-letters an error whose text holds characters SQS refuses (\\u0001, \\u0008, U+FFFF)', async () => {
    const h = await sqsHarness();
    harnesses.push(h);
    const recorder = new OutcomeRecorder();
    const consumer = idempotentConsumer<unknown, unknown>({
      name: uniqueName('sqs-chars'),
      store: new InMemoryInboxStore(),
      handler: async () => {
        throw new PermanentError('bad \u0001 \u0008 \uFFFF end');
      },
      hooks: { onOutcome: recorder.hook },
    });
    await h.startConsumer(consumer);
    const id = uniqueName('chars');
    await h.publish([{ id, body: '{}' }]);
    await recorder.waitFor(id, 'dead-letter', { timeoutMs: 30_000 });
    const letter = await receiveDeadLetter(h);
    const record = parseDeadLetterHeaders(
      expandDeadLetterHeaders(decodeMessageAttributes(letter.MessageAttributes)),
    );
    // The record travels as JSON, which escapes C0 controls (so they survive); U+FFFF has no escape there.
    expect(record).toMatchObject({
      originalId: id,
      reason: 'permanent-error',
      error: { message: 'bad \u0001 \u0008 \uFFFD end' },
    });
  });

  it('dead-letters a body near 256 KiB with a long id and a long error in a smaller form that fits, the id and reason kept', async () => {
    const h = await sqsHarness();
    harnesses.push(h);
    const recorder = new OutcomeRecorder();
    const consumer = idempotentConsumer<unknown, unknown>({
      name: uniqueName('sqs-size'),
      store: new InMemoryInboxStore(),
      maxMessageIdLength: 1_024,
      handler: async () => {
        throw new PermanentError(`refused: ${'why '.repeat(500)}`);
      },
      hooks: { onOutcome: recorder.hook },
    });
    await h.startConsumer(consumer);
    const id = `${uniqueName('size')}-${'i'.repeat(900)}`;
    const body = JSON.stringify({ pad: 'p'.repeat(DEFAULT_MAX_SQS_MESSAGE_BYTES - 6_000) });
    await h.publish([{ id, body, headers: { 'x-trace': 't'.repeat(2_000) } }]);
    await recorder.waitFor(id, 'dead-letter', { timeoutMs: 30_000 });
    const letter = await receiveDeadLetter(h);
    expect(letter.Body).toBe(body);
    expect(receivedBytes(letter)).toBeLessThanOrEqual(DEFAULT_MAX_SQS_MESSAGE_BYTES);
    const record = parseDeadLetterHeaders(
      expandDeadLetterHeaders(decodeMessageAttributes(letter.MessageAttributes)),
    );
    expect(record).toMatchObject({
      originalId: id,
      reason: 'permanent-error',
      consumer: consumer.name,
      attempts: 1,
    });
  });
  it('dead-letters a body near 256 KiB with a 40 KB id (invalid) within the limit: the minimal form clips the id and says so', async () => {
    // Hardening issue, item 3: the original (body + its 40 KB message-id attribute) fits SQS; every dead-letter
    // form used to carry the whole id, so even the minimal one was over the limit — refused by SQS on every
    // attempt, the message redelivered until the queue's redrive policy moved it without inboxkit's record.
    const h = await sqsHarness();
    harnesses.push(h);
    const recorder = new OutcomeRecorder();
    const consumer = idempotentConsumer<unknown, unknown>({
      name: uniqueName('sqs-long-id'),
      store: new InMemoryInboxStore(),
      handler: async () => undefined,
      hooks: { onOutcome: recorder.hook },
    });
    await h.startConsumer(consumer);
    const id = `${uniqueName('long')}-${'i'.repeat(40_000)}`;
    const original = {
      QueueUrl: '',
      MessageBody: '',
      MessageAttributes: { 'message-id': { DataType: 'String', StringValue: id } },
    };
    const padding = DEFAULT_MAX_SQS_MESSAGE_BYTES - sqsMessageBytes(original) - 200;
    const body = JSON.stringify({ pad: 'p'.repeat(padding - 10) });
    await h.publish([{ id, body }]);
    await recorder.waitFor(id, 'dead-letter', { timeoutMs: 30_000 });
    const letter = await receiveDeadLetter(h);
    expect(letter.Body).toBe(body);
    expect(receivedBytes(letter)).toBeLessThanOrEqual(DEFAULT_MAX_SQS_MESSAGE_BYTES);
    const headers = expandDeadLetterHeaders(decodeMessageAttributes(letter.MessageAttributes));
    expect(headers[HEADERS.reason]).toBe('invalid-id');
    expect(headers[HEADERS.dropped]).toContain('message-id-clipped');
    expect(headers[HEADERS.messageId]).toHaveLength(MINIMAL_ID_LENGTH);
    expect(recorder.count('dead-letter', id)).toBe(1);
  });
});

describe('dead-letter forms', () => {
  const id = `order-${'x'.repeat(1_500)}`;
  const message: InboundMessage = {
    id,
    body: 'b',
    headers: { 'message-id': id, 'x-trace': 't'.repeat(3_000) },
    source: { transport: 'sqs', destination: 'http://sqs/queue/orders' },
  };
  const outcome: DeadLetterOutcome = {
    status: 'dead-letter',
    messageId: id,
    reason: 'max-attempts',
    attempts: 5,
    error: { name: 'Error', message: 'm'.repeat(2_000), stack: 's'.repeat(4_000) },
  };
  const build = (form: 'full' | 'compact' | 'minimal') =>
    deadLetterMessage('http://sqs/queue/dlq', 'orders', message, { Body: 'b' }, outcome, form);

  it('shrinks from full to compact to minimal, and each reads back with the id, consumer and reason', () => {
    const sizes = (['full', 'compact', 'minimal'] as const).map((form) => sqsMessageBytes(build(form)));
    expect(sizes[0]).toBeGreaterThan(sizes[1]!);
    expect(sizes[1]).toBeGreaterThan(sizes[2]!);
    expect(sizes[2]).toBeLessThan(id.length + 1_000);
    for (const form of ['full', 'compact', 'minimal'] as const) {
      const record = parseDeadLetterHeaders(
        expandDeadLetterHeaders(decodeMessageAttributes(build(form).MessageAttributes)),
      );
      expect(record, form).toMatchObject({
        originalId: id,
        consumer: 'orders',
        reason: 'max-attempts',
        attempts: 5,
      });
    }
    expect(build('minimal').MessageAttributes?.[HEADERS.messageId]?.StringValue).toBe(id);
  });

  it('counts the body, and each attribute name, type and value, in bytes of UTF-8', () => {
    expect(
      sqsMessageBytes({
        QueueUrl: '',
        MessageBody: 'é',
        MessageAttributes: { ab: { DataType: 'String', StringValue: 'ü' } },
      }),
    ).toBe(2 + 2 + 6 + 2);
  });

  it('replaces only what SQS refuses', () => {
    expect(sqsText('a\tb\nc\rd\u0001e\u001Ff\uFFFEg\uFFFFh\uD800i🚀\uE000\uFFFD')).toBe(
      'a\tb\nc\rd\uFFFDe\uFFFDf\uFFFDg\uFFFDh\uFFFDi🚀\uE000\uFFFD',
    );
  });
});
