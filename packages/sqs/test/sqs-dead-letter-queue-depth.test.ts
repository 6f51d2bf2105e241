// sqsDeadLetterQueueDepth against ElasticMQ: the DLQ gauge's broker depth counts what sits in the DLQ,
// visible or held by a reader, and names the queue.

import { ReceiveMessageCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sqsDeadLetterQueueDepth } from '../src/index.js';
import type { CreatedQueues } from '../src/index.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

describe('sqsDeadLetterQueueDepth', () => {
  let client: SQSClient;
  let q: CreatedQueues;
  beforeAll(async () => {
    client = testSqsClient();
    q = await freshQueues(client, 'dlq-depth');
  });
  afterAll(async () => {
    await deleteQueues(client, q);
    client.destroy();
  });

  it('counts the dead letters in the DLQ, those a reader holds included', async () => {
    const gauge = sqsDeadLetterQueueDepth({ client, queueUrl: q.deadLetterQueueUrl });
    expect(gauge.name).toBe(q.deadLetterQueueUrl.slice(q.deadLetterQueueUrl.lastIndexOf('/') + 1));
    expect(await gauge.depth()).toBe(0);
    await client.send(
      new SendMessageBatchCommand({
        QueueUrl: q.deadLetterQueueUrl,
        Entries: ['a', 'b', 'c'].map((id) => ({ Id: id, MessageBody: id })),
      }),
    );
    expect(await gauge.depth()).toBe(3);
    await client.send(new ReceiveMessageCommand({ QueueUrl: q.deadLetterQueueUrl, MaxNumberOfMessages: 1, VisibilityTimeout: 30 }));
    expect(await gauge.depth()).toBe(3);
    expect(sqsDeadLetterQueueDepth({ client, queueUrl: q.deadLetterQueueUrl, name: 'payments-dlq' }).name).toBe('payments-dlq');
  });
});
