// sqsPublisher against ElasticMQ: batches beyond 10, FIFO groups and deduplication, headers beyond SQS's 10
// attributes, and failures reported as PublishError (never a silent partial send).

import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import { MessageTooLargeError, PublishError, replayHeaders } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { decodeMessageAttributes, sqsPublisher } from '../src/index.js';
import { isSqsTooLarge } from '../src/sqs-publisher.js';
import type { CreatedQueues } from '../src/index.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

let client: SQSClient;
const created: CreatedQueues[] = [];

beforeAll(() => {
  client = testSqsClient();
});
afterAll(async () => {
  for (const q of created) await deleteQueues(client, q);
  client.destroy();
});

async function queues(prefix: string, fifo = false): Promise<CreatedQueues> {
  const q = await freshQueues(client, prefix, { fifo });
  created.push(q);
  return q;
}

/** Receives (and keeps hidden) everything in the queue, in the order SQS hands it out. */
async function drain(queueUrl: string, expected: number): Promise<Message[]> {
  const all: Message[] = [];
  while (all.length < expected) {
    const { Messages = [] } = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 60,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    if (Messages.length === 0) break;
    all.push(...Messages);
  }
  return all;
}

describe('sqsPublisher', () => {
  it('sends more than 10 messages in batches, each with its message-id attribute and headers', async () => {
    const q = await queues('pub');
    const messages = Array.from({ length: 23 }, (_, n) => ({
      destination: q.queueUrl,
      id: `pub-${n}`,
      body: JSON.stringify({ n }),
      headers: { 'trace-id': `t${n}` },
    }));
    await sqsPublisher({ client }).publish(messages);
    const received = await drain(q.queueUrl, 23);
    const ids = received.map((m) => decodeMessageAttributes(m.MessageAttributes)['message-id']).sort();
    expect(ids).toEqual(messages.map((m) => m.id).sort());
    const first = received.find((m) => m.Body === JSON.stringify({ n: 0 }))!;
    expect(decodeMessageAttributes(first.MessageAttributes)).toEqual({
      'message-id': 'pub-0',
      'trace-id': 't0',
    });
  });

  it('keeps headers beyond SQS’s 10 attributes, packed into one', async () => {
    const q = await queues('pub-many');
    const headers: Record<string, string> = {};
    for (let i = 0; i < 15; i++) headers[`h-${i}`] = `v${i}`;
    await sqsPublisher({ client }).publish([{ destination: q.queueUrl, id: 'many', body: 'x', headers }]);
    const [m] = await drain(q.queueUrl, 1);
    expect(Object.keys(m!.MessageAttributes ?? {})).toHaveLength(10);
    expect(decodeMessageAttributes(m!.MessageAttributes)).toEqual({ 'message-id': 'many', ...headers });
  });

  it('uses the key as MessageGroupId on a FIFO queue, in order, and deduplicates by message id except for replays', async () => {
    const q = await queues('pub', true);
    const publisher = sqsPublisher({ client });
    await publisher.publish(
      [0, 1, 2, 3, 4].map((n) => ({
        destination: q.queueUrl,
        id: `fifo-${n}`,
        key: 'customer-1',
        body: String(n),
      })),
    );
    await publisher.publish([{ destination: q.queueUrl, id: 'fifo-0', key: 'customer-1', body: 'again' }]);
    await publisher.publish([
      {
        destination: q.queueUrl,
        id: 'fifo-0',
        key: 'customer-1',
        body: 'replayed',
        headers: replayHeaders({ replayId: 'r-1' }),
      },
    ]);
    const received = await drain(q.queueUrl, 6);
    expect(received.map((m) => m.Body)).toEqual(['0', '1', '2', '3', '4', 'replayed']);
    expect(new Set(received.map((m) => m.Attributes?.MessageGroupId))).toEqual(new Set(['customer-1']));
  });

  it('refuses a body with a character SQS does not accept before sending any message of the call, naming the message and the character', async () => {
    const q = await queues('pub-chars');
    const publisher = sqsPublisher({ client });
    const bad: [string, string, string][] = [
      ['nul', 'before \u0000 after', 'U+0000'],
      ['control', 'bell \u0007', 'U+0007'],
      ['lone-high', 'half \uD83D pair', 'U+D83D'],
      ['lone-low', '\uDE00 alone', 'U+DE00'],
      ['nonchar', 'x\uFFFE', 'U+FFFE'],
    ];
    for (const [id, body, character] of bad) {
      // Twelve good messages around the bad one: two batches, neither may be sent.
      const messages = Array.from({ length: 12 }, (_, n) => ({
        destination: q.queueUrl,
        id: `${id}-${n}`,
        body: 'ok',
      }));
      messages.splice(11, 0, { destination: q.queueUrl, id, body });
      const error = await publisher.publish(messages).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(PublishError);
      expect((error as Error).message).toContain(`message ${id}:`);
      expect((error as Error).message).toContain(character);
    }
    expect(await drain(q.queueUrl, 1)).toEqual([]);
  });

  it('sends every character SQS accepts unchanged: tab, line breaks, astral pairs, the private use area, U+FFFD', async () => {
    const q = await queues('pub-chars-ok');
    const body = 'tab\t lf\n cr\r space é 中 \uD83D\uDE00 \uE000 \uFFFD \uD7FF \u{10FFFF}';
    await sqsPublisher({ client }).publish([{ destination: q.queueUrl, id: 'chars-ok', body }]);
    const [m] = await drain(q.queueUrl, 1);
    expect(m?.Body).toBe(body);
  });

  it('rejects with a PublishError when SQS refuses the batch or an entry', async () => {
    const q = await queues('pub-fail');
    const publisher = sqsPublisher({ client });
    await expect(
      publisher.publish([{ destination: `${q.queueUrl}-missing`, id: 'x', body: 'x' }]),
    ).rejects.toBeInstanceOf(PublishError);
    // SQS refuses characters outside its XML-safe set in a body.
    await expect(
      publisher.publish([{ destination: q.queueUrl, id: 'bad', body: 'nul \u0000 inside' }]),
    ).rejects.toThrow(PublishError);
    await expect(publisher.publish([{ destination: q.queueUrl, id: 'empty', body: '' }])).rejects.toThrow(
      /empty body/,
    );
  });

  it('refuses a message over its queue’s size limit with a non-retriable MessageTooLargeError naming it, before sending any message of the call', async () => {
    // Outside probe (hardening issue, left item): a message SQS refuses on every try came back as a retriable
    // PublishError, so the outbox relay rescheduled its row — and held the rows behind it on its key — until
    // parkAfterMs. The publisher now reads the queue's own limit once and names the message. ElasticMQ reports
    // no MaximumMessageSize (and enforces none), so the limit here is SQS's default, 256 KiB.
    const q = await queues('pub-size');
    const publisher = sqsPublisher({ client });
    const messages = [
      { destination: q.queueUrl, id: 'small-before', body: 'ok' },
      { destination: q.queueUrl, id: 'too-big', body: 'b'.repeat(262_145) },
      { destination: q.queueUrl, id: 'small-after', body: 'ok' },
    ];
    const error = await publisher.publish(messages).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect((error as MessageTooLargeError).messageId).toBe('too-big');
    expect((error as MessageTooLargeError).retriable).toBe(false);
    expect((error as Error).message).toMatch(/: \d+ bytes, the queue takes at most 262144$/);
    expect(await drain(q.queueUrl, 1)).toEqual([]);
    // Under the limit, the same publisher sends (the limit is per queue, read once).
    await publisher.publish([messages[0]!, messages[2]!]);
    expect((await drain(q.queueUrl, 2)).map((m) => m.Body)).toEqual(['ok', 'ok']);
  });

  it('checks against maxMessageBytes when given, and refuses a bad value at construction', async () => {
    const q = await queues('pub-size-fixed');
    const publisher = sqsPublisher({ client, maxMessageBytes: 100 });
    await expect(
      publisher.publish([{ destination: q.queueUrl, id: 'over-100', body: 'x'.repeat(200) }]),
    ).rejects.toMatchObject({ name: 'MessageTooLargeError', messageId: 'over-100' });
    await publisher.publish([{ destination: q.queueUrl, id: 'under-100', body: 'x'.repeat(20) }]);
    expect(await drain(q.queueUrl, 1)).toHaveLength(1);
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => sqsPublisher({ client, maxMessageBytes: bad })).toThrow(/maxMessageBytes/);
    }
  });

  it('recognises SQS’s own size refusals (request and batch entry) and nothing else', () => {
    // The shapes AWS documents; ElasticMQ does not enforce the limit, so the refusal path is specified here.
    expect(
      isSqsTooLarge({
        name: 'BatchRequestTooLong',
        message: 'Batch requests cannot be longer than 262144 bytes.',
      }),
    ).toBe(true);
    expect(
      isSqsTooLarge({
        name: 'InvalidParameterValue',
        message: 'One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes.',
      }),
    ).toBe(true);
    expect(isSqsTooLarge({ Code: 'MessageTooLong', Message: 'too long' })).toBe(true);
    expect(isSqsTooLarge({ name: 'QueueDoesNotExist', message: 'The specified queue does not exist.' })).toBe(
      false,
    );
    expect(isSqsTooLarge({ Code: 'InternalError', Message: 'We encountered an internal error.' })).toBe(
      false,
    );
    expect(isSqsTooLarge({ name: 'InvalidMessageContents', message: 'Invalid characters found.' })).toBe(
      false,
    );
    expect(isSqsTooLarge({})).toBe(false);
  });
});
