// What the transport relies on from the SQS server, checked against the one the tests run on (ElasticMQ):
// receive counts, visibility changes, FIFO group blocking, per-entry batch failures and redrive. If one of
// these fails, the transport's guarantees on that server are not what docs/sqs.md says.

import { setTimeout as sleep } from 'node:timers/promises';

import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

let client: SQSClient;
const created: Awaited<ReturnType<typeof freshQueues>>[] = [];

beforeAll(() => {
  client = testSqsClient();
});
afterAll(async () => {
  for (const q of created) await deleteQueues(client, q);
  client.destroy();
});

async function queues(prefix: string, options: Parameters<typeof freshQueues>[2] = {}) {
  const q = await freshQueues(client, prefix, options);
  created.push(q);
  return q;
}

async function receive(queueUrl: string, max = 10, visibility = 30, wait = 0): Promise<Message[]> {
  const result = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: max,
      VisibilityTimeout: visibility,
      WaitTimeSeconds: wait,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['All'],
    }),
  );
  return result.Messages ?? [];
}

const bodies = (messages: readonly Message[]) => messages.map((m) => m.Body);

describe('the SQS server', () => {
  it('counts every receive in ApproximateReceiveCount and reports SentTimestamp', async () => {
    const { queueUrl } = await queues('behaviour-count');
    await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'x' }));
    const counts: string[] = [];
    for (let i = 0; i < 3; i++) {
      const [m] = await receive(queueUrl, 1, 30, 1);
      counts.push(m!.Attributes!.ApproximateReceiveCount!);
      expect(Number(m!.Attributes!.SentTimestamp)).toBeGreaterThan(0);
      await client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: m!.ReceiptHandle!,
          VisibilityTimeout: 0,
        }),
      );
    }
    expect(counts).toEqual(['1', '2', '3']);
  });

  it('keeps a message hidden when its visibility is extended, and shows it at once when set to 0', async () => {
    const { queueUrl } = await queues('behaviour-visibility');
    await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'x' }));
    const [m] = await receive(queueUrl, 1, 1, 1);
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl,
        ReceiptHandle: m!.ReceiptHandle!,
        VisibilityTimeout: 4,
      }),
    );
    await sleep(1_500);
    expect(await receive(queueUrl)).toEqual([]);
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl,
        ReceiptHandle: m!.ReceiptHandle!,
        VisibilityTimeout: 0,
      }),
    );
    expect(bodies(await receive(queueUrl, 10, 30, 1))).toEqual(['x']);
  });

  it('blocks a FIFO group while one of its messages is in flight, also after a visibility change, and keeps order', async () => {
    const { queueUrl } = await queues('behaviour-fifo', { fifo: true });
    const entries = ['a1', 'a2', 'a3', 'b1'].map((body) => ({
      Id: body,
      MessageBody: body,
      MessageGroupId: body[0]!,
      MessageDeduplicationId: body,
    }));
    await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
    const first = await receive(queueUrl, 1);
    expect(bodies(first)).toEqual(['a1']);
    // a1 in flight: the rest of group a is held back, group b is not.
    expect(bodies(await receive(queueUrl))).toEqual(['b1']);
    // A retry delay on a1 keeps the group blocked.
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl,
        ReceiptHandle: first[0]!.ReceiptHandle!,
        VisibilityTimeout: 2,
      }),
    );
    expect(bodies(await receive(queueUrl))).toEqual([]);
    await sleep(2_200);
    expect(bodies(await receive(queueUrl, 10, 30, 1))).toEqual(['a1', 'a2', 'a3']);
  });

  it('keeps a FIFO group blocked by a delayed head when the messages behind it are returned at once', async () => {
    const { queueUrl } = await queues('behaviour-fifo-return', { fifo: true });
    await client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: ['a1', 'a2', 'a3'].map((body) => ({
          Id: body,
          MessageBody: body,
          MessageGroupId: 'a',
          MessageDeduplicationId: body,
        })),
      }),
    );
    const batch = await receive(queueUrl, 10, 30, 1);
    expect(bodies(batch)).toEqual(['a1', 'a2', 'a3']);
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl,
        ReceiptHandle: batch[0]!.ReceiptHandle!,
        VisibilityTimeout: 2,
      }),
    );
    for (const m of batch.slice(1)) {
      await client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: m.ReceiptHandle!,
          VisibilityTimeout: 0,
        }),
      );
    }
    expect(bodies(await receive(queueUrl)), 'a2 overtook the delayed a1').toEqual([]);
    await sleep(2_200);
    const again = await receive(queueUrl, 10, 30, 1);
    expect(bodies(again)).toEqual(['a1', 'a2', 'a3']);
    expect(again.map((m) => m.Attributes?.ApproximateReceiveCount)).toEqual(['2', '2', '2']);
  });

  it('reports a bad receipt handle in DeleteMessageBatch as a failed entry, deleting the others', async () => {
    const { queueUrl } = await queues('behaviour-delete');
    await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'x' }));
    const [m] = await receive(queueUrl, 1, 30, 1);
    const result = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [
          { Id: 'good', ReceiptHandle: m!.ReceiptHandle! },
          { Id: 'bad', ReceiptHandle: 'not-a-receipt-handle' },
        ],
      }),
    );
    expect(result.Successful?.map((s) => s.Id)).toEqual(['good']);
    expect(result.Failed?.map((f) => f.Id)).toEqual(['bad']);
  });

  it('moves a message to the dead-letter queue after maxReceiveCount receives (the redrive backstop)', async () => {
    const { queueUrl, deadLetterQueueUrl } = await queues('behaviour-redrive', {
      maxAttempts: 1,
      headroom: 1,
    });
    await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'poison' }));
    for (let i = 0; i < 2; i++) {
      const [m] = await receive(queueUrl, 1, 30, 1);
      expect(m?.Body).toBe('poison');
      await client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: m!.ReceiptHandle!,
          VisibilityTimeout: 0,
        }),
      );
    }
    expect(await receive(queueUrl, 10, 30, 1)).toEqual([]);
    expect(bodies(await receive(deadLetterQueueUrl, 10, 30, 1))).toEqual(['poison']);
  });
});
